package console

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/webhooks"
)

func TestHandler(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X-API", r.URL.Path) })
	h := Mount(api)
	cases := []struct {
		method, path string
		status       int
		api          bool
	}{
		{"GET", "/console/", 200, false},
		{"GET", "/console/app.js", 200, false},
		{"HEAD", "/console/style.css", 200, false},
		{"GET", "/console", 301, false},
		{"GET", "/console/nope.js", 404, false},
		{"POST", "/console/", 405, false},
		{"GET", "/v1/agents", 200, true},
		{"GET", "//v1/../v1/agents", 200, true}, // the API's paths reach it untouched
		{"GET", "/consoles", 200, true},
		{"GET", "/favicon.ico", 200, false},
		{"GET", "/console/favicon.svg", 200, false},
		{"GET", "/console/webhook-events.js", 200, false},
		{"HEAD", "/console/webhook-events.js", 200, false},
		{"POST", "/console/webhook-events.js", 405, false},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if w.Code != c.status || (w.Header().Get("X-API") != "") != c.api {
			t.Errorf("%s %s: %d api=%q, want %d api=%v", c.method, c.path, w.Code, w.Header().Get("X-API"), c.status, c.api)
		}
		if !c.api && c.status == 200 {
			csp := w.Header().Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") || w.Header().Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("%s: security headers %v", c.path, w.Header())
			}
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/console/app.js", nil))
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("app.js served as %q: browsers refuse modules that are not JavaScript", ct)
	}
}

// TestAssetsSelfContained: nothing outside the server is loaded (no CDN:
// nothing outside the machine is reachable), no inline script (the CSP
// forbids it), and the key is never put in a URL or in local storage.
func TestAssetsSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|import\s.*from\s+["']https?:|url\(\s*["']?https?:`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := assets.ReadFile(path)
		s := string(b)
		if external.MatchString(s) {
			t.Errorf("%s loads something from another origin: %s", path, external.FindString(s))
		}
		if strings.Contains(s, "localStorage") {
			t.Errorf("%s uses localStorage", path)
		}
		if strings.HasSuffix(path, ".html") && regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(s) {
			t.Errorf("%s has an inline script", path)
		}
		if strings.HasSuffix(path, ".js") && regexp.MustCompile(`[?&](api_key|key|x-api-key)=`).MatchString(s) {
			t.Errorf("%s puts a key in a query string", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWebhookEventsModule: webhook-events.js, which the webhooks page
// imports, is a JavaScript module exporting exactly the event types the
// API accepts (webhooks.EventTypes), in their order.
func TestWebhookEventsModule(t *testing.T) {
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest("GET", "/console/webhook-events.js", nil))
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
	m := regexp.MustCompile(`(?m)^export const EVENT_TYPES = Object\.freeze\((\[.*\])\);$`).FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no EVENT_TYPES export in %s", w.Body)
	}
	var got []string
	if err := json.Unmarshal([]byte(m[1]), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, webhooks.EventTypes) || len(got) == 0 {
		t.Errorf("EVENT_TYPES %v, want %v", got, webhooks.EventTypes)
	}
}
