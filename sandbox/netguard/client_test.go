package netguard

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"http://a.example/x", "http://a.example/y?q", true},
		{"http://a.example/", "http://a.example:80/", true},
		{"https://A.example/", "https://a.example:443/", true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/mcp", true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8081/", false},
		{"http://a.example/", "https://a.example/", false},
		{"http://a.example/", "http://b.a.example/", false},
		{"http://a.example:443/", "https://a.example/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	}
	for _, tt := range tests {
		a, _ := url.Parse(tt.a)
		b, _ := url.Parse(tt.b)
		if got := SameOrigin(a, b); got != tt.want {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestClientRedirects: a Client follows a redirect within the origin,
// with the request's Authorization, and answers a redirect to another
// origin (another port of an allowed address) with the 3xx itself.
func TestClientRedirects(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	var auth atomic.Value
	mux := http.NewServeMux()
	mux.Handle("/same", http.RedirectHandler("/final", http.StatusTemporaryRedirect))
	mux.Handle("/away", http.RedirectHandler(other.URL+"/final", http.StatusTemporaryRedirect))
	mux.HandleFunc("/final", func(w http.ResponseWriter, r *http.Request) { auth.Store(r.Header.Get("Authorization")) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	g := Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	c := g.Client(0)
	defer c.CloseIdleConnections()
	get := func(path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("client_secret=s"))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get("/same"); resp.StatusCode != http.StatusOK || auth.Load() != "Bearer tok" {
		t.Errorf("same-origin redirect: %s, Authorization %q", resp.Status, auth.Load())
	}
	if resp := get("/away"); resp.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("redirect to another origin answered %s, want the 307 itself", resp.Status)
	}
	if otherHits.Load() != 0 {
		t.Errorf("the other origin was reached %d times", otherHits.Load())
	}
}

// TestDeniedErrorHint: a guard's hint follows refused addresses, not
// refused names (which no allowlist can permit).
func TestDeniedErrorHint(t *testing.T) {
	g := Guard{Hint: "allow it with --outbound-allow"}
	err := g.CheckIP(netip.MustParseAddr("169.254.169.254"))
	if want := "netguard: 169.254.169.254 is a link-local address (allow it with --outbound-allow)"; err == nil || err.Error() != want {
		t.Errorf("CheckIP = %v, want %q", err, want)
	}
	_, err = g.Resolve(t.Context(), "localhost")
	if err == nil || strings.Contains(err.Error(), "--outbound-allow") {
		t.Errorf("Resolve(localhost) = %v, want a refusal without the hint", err)
	}
}
