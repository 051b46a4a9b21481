package connector

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/reinsdev/reins/internal/mcptest"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// recorder is a real HTTP server that keeps what reached it: one line per
// request with its method, path, Authorization header and body.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex // guards seen
	seen []string
}

// startRecorder starts a recorder listening on addr ("127.0.0.1:0") that
// answers 200 with an empty JSON object. It returns nil if addr cannot be
// listened on (no IPv6 loopback).
func startRecorder(t *testing.T, addr string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil
	}
	r := &recorder{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.Path+" auth="+req.Header.Get("Authorization")+" body="+string(body))
		r.mu.Unlock()
		io.WriteString(w, `{}`)
	}))
	r.Listener.Close()
	r.Listener = ln
	r.Start()
	t.Cleanup(r.Close)
	return r
}

// requests returns what reached the recorder (nil for a nil recorder).
func (r *recorder) requests() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// internalForm is a URL naming an internal destination and what its
// refusal must say.
type internalForm struct {
	url    string
	reason string
}

// internalForms lists the forms of internal URLs the guard refuses even
// with 127.0.0.1 allowed; port4 and port6 are ports of loopback servers
// that must never see a request through them.
func internalForms(port4, port6, path string) []internalForm {
	return []internalForm{
		{"http://169.254.169.254" + path, "169.254.169.254 is a link-local address"},
		{"http://[::1]:" + port6 + path, "::1 is a loopback address"},
		{"http://0.0.0.0:" + port4 + path, "0.0.0.0 is an unspecified address"},
		{"http://localhost:" + port4 + path, "localhost is a name for the local machine"},
		{"http://metadata.google.internal" + path, "metadata.google.internal is a name for the local machine or a metadata service"},
		{"http://0x7f000001:" + port4 + path, "0x7f000001 is a non-canonical numeric form of 127.0.0.1"},
	}
}

// loopbackTargets starts a recorder on 127.0.0.1 and one on ::1 (where
// there is IPv6) and returns them with the internal URL forms that point
// at them.
func loopbackTargets(t *testing.T, path string) ([]internalForm, []*recorder) {
	t.Helper()
	r4 := startRecorder(t, "127.0.0.1:0")
	if r4 == nil {
		t.Fatal("cannot listen on 127.0.0.1")
	}
	r6 := startRecorder(t, "[::1]:0")
	port6 := "1"
	if r6 != nil {
		_, port6, _ = net.SplitHostPort(r6.Listener.Addr().String())
	}
	_, port4, _ := net.SplitHostPort(r4.Listener.Addr().String())
	return internalForms(port4, port6, path), []*recorder{r4, r6}
}

func noRequests(t *testing.T, rs ...*recorder) {
	t.Helper()
	for _, r := range rs {
		if got := r.requests(); len(got) > 0 {
			t.Errorf("a refused destination was reached: %q", got)
		}
	}
}

// TestInternalMCPURLsRefused connects pools to internal URLs: each is a
// connection failure naming the reason, and nothing reaches the loopback
// servers behind them, even with 127.0.0.1 allowed.
func TestInternalMCPURLsRefused(t *testing.T) {
	forms, recs := loopbackTargets(t, "/mcp")
	ctx := context.Background()
	for _, f := range forms {
		p := newPool(t, Config{Servers: []Server{{"s", f.url}}, ConnectTimeout: 5 * time.Second})
		_, err := p.Tools(ctx)
		e := asError(t, err, ConnectionFailed, "s")
		if !strings.Contains(e.Message, f.reason) || !strings.Contains(e.Message, f.url) {
			t.Errorf("%s: message %q, want the URL and %q", f.url, e.Message, f.reason)
		}
		var d *netguard.DeniedError
		if !errors.As(err, &d) {
			t.Errorf("%s: %v does not wrap a *netguard.DeniedError", f.url, err)
		}
	}
	noRequests(t, recs...)
}

// TestLoopbackRefusedByDefault: a pool without a client of its own, and
// a guard without an allowlist, refuse a server on 127.0.0.1; the
// operator's allowlist lets the same server through.
func TestLoopbackRefusedByDefault(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Token: "tok"})
	v := newVaults(t)
	v.bearer(t, srv.URL(), "tok")
	ctx := context.Background()
	for name, hc := range map[string]*http.Client{"nil client": nil, "zero guard": guardedClient(t, nil)} {
		p, err := NewPool(Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds(), HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Tools(ctx)
		p.Close()
		e := asError(t, err, ConnectionFailed, "s")
		if !strings.Contains(e.Message, "127.0.0.1 is a loopback address") {
			t.Errorf("%s: message %q", name, e.Message)
		}
	}
	if srv.SawToken("tok") {
		t.Fatal("the refused server saw the token")
	}
	p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds(),
		HTTPClient: guardedClient(t, loopback)})
	if _, err := p.Tools(ctx); err != nil || !srv.SawToken("tok") {
		t.Fatalf("with 127.0.0.1/32 allowed: %v, token seen %v", err, srv.SawToken("tok"))
	}
}

// TestInternalTokenEndpointsRefused refreshes expired credentials whose
// token endpoints are internal: the refresh fails with the reason and no
// grant (refresh token, client secret) reaches the loopback servers.
func TestInternalTokenEndpointsRefused(t *testing.T) {
	forms, recs := loopbackTargets(t, "/token")
	srv := mcptest.Start(t, mcptest.Options{Token: "right"})
	ctx := context.Background()
	for _, f := range forms {
		v := newVaults(t)
		past := ma.Time(time.Now().Add(-time.Minute))
		v.add(t, ma.CredentialAuth{Type: ma.AuthMCPOAuth, MCPServerURL: srv.URL(), ExpiresAt: &past,
			Refresh: &ma.OAuthRefresh{ClientID: "cid", TokenEndpoint: f.url, TokenEndpointAuth: ma.TokenEndpointAuth{Type: "client_secret_post"}}},
			vault.Secrets{AccessToken: "stale", RefreshToken: "rt-secret", ClientSecret: "cs-secret"})
		p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds()})
		_, err := p.Tools(ctx)
		e := asError(t, err, AuthenticationFailed, "s")
		if !strings.Contains(e.Message, f.reason) {
			t.Errorf("%s: message %q, want %q", f.url, e.Message, f.reason)
		}
		var re *RefreshError
		var d *netguard.DeniedError
		if !errors.As(err, &re) || re.Response != nil || !errors.As(err, &d) {
			t.Errorf("%s: %v is not a *RefreshError wrapping a *netguard.DeniedError", f.url, err)
		}
	}
	noRequests(t, recs...)
}

// TestInternalProbeURLsRefused probes internal URLs as mcp_oauth_validate
// does: each is an error naming the reason, and the token goes nowhere.
func TestInternalProbeURLsRefused(t *testing.T) {
	forms, recs := loopbackTargets(t, "/mcp")
	hc := guardedClient(t, loopback)
	for _, f := range forms {
		resp, err := Probe(context.Background(), hc, f.url, "bearer-secret")
		if err == nil || !strings.Contains(err.Error(), f.reason) {
			t.Errorf("Probe(%s) = %+v, %v; want an error saying %q", f.url, resp, err, f.reason)
		}
	}
	noRequests(t, recs...)
}

// redirector starts a server on 127.0.0.1 that answers every request with
// a 307 to the same path on target, keeping method and body.
func redirector(t *testing.T, target string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRedirectsCarryNoCredentials: a server that redirects to another
// origin (another port of 127.0.0.1, allowed too) never passes the bearer
// token, the refresh token or the client secret on.
func TestRedirectsCarryNoCredentials(t *testing.T) {
	ctx := context.Background()
	hc := guardedClient(t, loopback)

	t.Run("mcp", func(t *testing.T) {
		other := startRecorder(t, "127.0.0.1:0")
		from := redirector(t, other.URL)
		v := newVaults(t)
		v.bearer(t, from.URL+"/mcp", "bearer-secret")
		p := newPool(t, Config{Servers: []Server{{"s", from.URL + "/mcp"}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds(), HTTPClient: hc})
		_, err := p.Tools(ctx)
		e := asError(t, err, ConnectionFailed, "s")
		if !strings.Contains(e.Message, "307") || !strings.Contains(e.Message, "within the origin") {
			t.Errorf("message %q, want the 307 and the rule", e.Message)
		}
		noRequests(t, other)
	})
	t.Run("mcp with a client that follows redirects", func(t *testing.T) {
		// Whatever the client does, the pool sends the token only to the
		// server's origin.
		other := startRecorder(t, "127.0.0.1:0")
		from := redirector(t, other.URL)
		v := newVaults(t)
		v.bearer(t, from.URL+"/mcp", "bearer-secret")
		follow := &http.Client{Transport: hc.Transport}
		p := newPool(t, Config{Servers: []Server{{"s", from.URL + "/mcp"}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds(), HTTPClient: follow})
		p.Tools(ctx)
		got := other.requests()
		if len(got) == 0 {
			t.Fatal("the redirect was not followed; the test proves nothing")
		}
		if strings.Contains(strings.Join(got, "\n"), "bearer-secret") {
			t.Fatalf("the bearer token reached another origin: %q", got)
		}
	})
	t.Run("refresh", func(t *testing.T) {
		other := startRecorder(t, "127.0.0.1:0")
		from := redirector(t, other.URL)
		for _, auth := range []string{"client_secret_post", "client_secret_basic"} {
			_, err := Refresh(ctx, hc, RefreshRequest{TokenEndpoint: from.URL + "/token", ClientID: "cid", RefreshToken: "rt-secret",
				AuthType: auth, ClientSecret: "cs-secret"})
			var re *RefreshError
			if !errors.As(err, &re) || re.Response == nil || re.Response.StatusCode != http.StatusTemporaryRedirect {
				t.Errorf("%s: refresh through a redirect: %v, want the 307 as the answer", auth, err)
			}
		}
		noRequests(t, other)
	})
	t.Run("probe", func(t *testing.T) {
		other := startRecorder(t, "127.0.0.1:0")
		from := redirector(t, other.URL)
		resp, err := Probe(ctx, hc, from.URL+"/mcp", "bearer-secret")
		if err != nil || resp == nil || resp.StatusCode != http.StatusTemporaryRedirect {
			t.Errorf("probe through a redirect: %+v, %v; want the 307 as the answer", resp, err)
		}
		noRequests(t, other)
	})
}

// TestCaptureExcerpt: what a probe reports of an arbitrary host's answer
// is a short, printable excerpt, scrubbed of the token and marked
// truncated.
func TestCaptureExcerpt(t *testing.T) {
	body := "token bearer-secret \x1b[31mred\x00\r\n\tnext\u202e" + strings.Repeat("A", 8000) + "\xff"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	resp, err := Probe(context.Background(), guardedClient(t, loopback), srv.URL, "bearer-secret")
	if err != nil || resp == nil {
		t.Fatalf("probe: %+v, %v", resp, err)
	}
	if resp.StatusCode != 500 || resp.ContentType != "text/plain" || !resp.BodyTruncated {
		t.Errorf("response %+v", resp)
	}
	if len(resp.Body) > MaxExcerpt || !utf8.ValidString(resp.Body) {
		t.Errorf("excerpt of %d bytes (max %d), valid UTF-8 %v", len(resp.Body), MaxExcerpt, utf8.ValidString(resp.Body))
	}
	for _, r := range resp.Body {
		if r < 0x20 || r == 0x7f || r == '\u202e' {
			t.Fatalf("excerpt holds control character %U: %q", r, resp.Body)
		}
	}
	if want := "token [redacted] \ufffd[31mred\ufffd   next\ufffdAAA"; !strings.HasPrefix(resp.Body, want) {
		t.Errorf("excerpt %q, want it to start %q", resp.Body, want)
	}

	short := Capture(&http.Response{StatusCode: 400, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"error":"invalid_grant"}`))})
	if short.Body != `{"error":"invalid_grant"}` || short.BodyTruncated {
		t.Errorf("short body captured as %+v", short)
	}
}
