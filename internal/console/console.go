// Package console serves the web console: a few hand-written ES modules and
// a style sheet embedded in the binary, mounted by reins serve at
// /console/. The console is a client of the public API like any other: it
// signs in with an API key kept in the browser's session storage and sent
// in the x-api-key header, never in a URL.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
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

// Handler serves the console's files under [Prefix]. /console redirects to
// /console/; a path that is not a file answers 404. The pages are routed in
// the browser (#/sessions/…), so the server knows only the files.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub))
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
