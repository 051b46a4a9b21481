// Package console serves the web console: a few hand-written ES modules and
// a style sheet embedded in the binary, mounted by reins serve at
// /console/. The console is a client of the public API like any other: it
// signs in with an API key kept in the browser's session storage and sent
// in the x-api-key header, never in a URL.
package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/webhooks"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is mounted.
const Prefix = "/console/"

// securityHeaders are set on every console response: scripts and styles
// from the console itself only (no inline script, no CDN), requests to
// this origin only, no framing, no referrer (a URL never carries the key,
// but a session id need not leak either).
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
	"Cache-Control":          "no-cache",
}

// eventsModule is the path of the one module the server writes rather
// than embeds: the webhook event types endpoints may subscribe to.
const eventsModule = Prefix + "webhook-events.js"

// webhookEvents is the module at [eventsModule]: webhooks.EventTypes, the
// list the API checks enabled_events against, so that the console's form
// offers the types the server accepts and no other.
func webhookEvents() []byte {
	types, err := json.Marshal(webhooks.EventTypes)
	if err != nil {
		panic(err) // a list of strings always marshals
	}
	return []byte("// Written by the server from webhooks.EventTypes: the types /v1/organizations/webhooks accepts.\n" +
		"export const EVENT_TYPES = Object.freeze(" + string(types) + ");\n")
}

// Handler serves the console's files under [Prefix]. /console redirects to
// /console/; a path that is not a file answers 404. The pages are routed in
// the browser (#/sessions/…), so the server knows only the files.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub))
	events := webhookEvents()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if r.URL.Path == eventsModule {
			http.ServeContent(w, r, "webhook-events.js", time.Time{}, bytes.NewReader(events))
			return
		}
		files.ServeHTTP(w, r)
	})
}

// Mount returns a handler that serves the console under [Prefix] and
// every other path with api, untouched (no ServeMux in between to clean
// or redirect the API's paths). /favicon.ico, which browsers ask for on
// their own (the console's pages name their icon, but a JSON answer of the
// API opened in a tab does not), is the console's icon rather than an
// unauthenticated API request.
func Mount(api http.Handler) http.Handler {
	c := Handler()
	root := strings.TrimSuffix(Prefix, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/favicon.ico" {
			r = r.Clone(r.Context())
			r.URL.Path = Prefix + "favicon.svg"
		}
		if r.URL.Path == root || strings.HasPrefix(r.URL.Path, Prefix) {
			c.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
