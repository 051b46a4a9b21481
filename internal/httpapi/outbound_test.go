package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/mcptest"
	ma "github.com/reinsdev/reins/managedagents"
)

// hitRecorder is a real HTTP server that keeps a line per request that
// reached it, with its Authorization header and body.
type hitRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

// startHitRecorder listens on addr; it returns nil where addr cannot be
// listened on (no IPv6 loopback).
func startHitRecorder(t *testing.T, addr string) *hitRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil
	}
	r := &hitRecorder{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.Path+" auth="+req.Header.Get("Authorization")+" body="+string(body))
		r.mu.Unlock()
	}))
	r.Listener.Close()
	r.Listener = ln
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *hitRecorder) requests() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// outboundFixture is a vault fixture with helpers to create mcp_oauth
// credentials and validate them, reading the reins extensions too.
type outboundFixture struct {
	*vaultFixture
	vaultID string
}

func newOutboundFixture(t *testing.T) *outboundFixture {
	f := newVaultFixture(t)
	v, err := f.client.Beta.Vaults.New(context.Background(), anthropic.BetaVaultNewParams{DisplayName: "v"})
	if err != nil {
		t.Fatal(err)
	}
	return &outboundFixture{vaultFixture: f, vaultID: v.ID}
}

// cred creates an mcp_oauth credential; tokenEndpoint "" means none.
func (f *outboundFixture) cred(t *testing.T, serverURL, tokenEndpoint string) string {
	t.Helper()
	p := &anthropic.BetaManagedAgentsMCPOAuthCreateParams{MCPServerURL: serverURL, AccessToken: "at-secret"}
	if tokenEndpoint != "" {
		p.Refresh = anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "c", RefreshToken: "rt-secret", TokenEndpoint: tokenEndpoint,
			TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{OfClientSecretPost: &anthropic.BetaManagedAgentsTokenEndpointAuthPostParam{ClientSecret: "cs-secret"}}}
	}
	c, err := f.client.Beta.Vaults.Credentials.New(context.Background(), f.vaultID,
		anthropic.BetaVaultCredentialNewParams{Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: p}})
	if err != nil {
		t.Fatalf("create a credential for %s: %v", serverURL, err)
	}
	return c.ID
}

func (f *outboundFixture) validate(t *testing.T, id string) ma.CredentialValidation {
	t.Helper()
	res, err := f.client.Beta.Vaults.Credentials.MCPOAuthValidate(context.Background(), id, anthropic.BetaVaultCredentialMCPOAuthValidateParams{VaultID: f.vaultID})
	if err != nil {
		t.Fatal(err)
	}
	var out ma.CredentialValidation
	if err := json.Unmarshal([]byte(res.RawJSON()), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// internalURLs returns internal URL forms pointing at loopback recorders
// (on 127.0.0.1 and ::1), what each refusal must say, and the recorders.
func internalURLs(t *testing.T, path string) (map[string]string, []*hitRecorder) {
	t.Helper()
	r4 := startHitRecorder(t, "127.0.0.1:0")
	r6 := startHitRecorder(t, "[::1]:0")
	_, p4, _ := net.SplitHostPort(r4.Listener.Addr().String())
	p6 := "1"
	if r6 != nil {
		_, p6, _ = net.SplitHostPort(r6.Listener.Addr().String())
	}
	return map[string]string{
		"http://169.254.169.254" + path:          "169.254.169.254 is a link-local address",
		"http://[::1]:" + p6 + path:              "::1 is a loopback address",
		"http://0.0.0.0:" + p4 + path:            "0.0.0.0 is an unspecified address",
		"http://localhost:" + p4 + path:          "localhost is a name for the local machine",
		"http://metadata.google.internal" + path: "metadata.google.internal is a name for the local machine or a metadata service",
		"http://0x7f000001:" + p4 + path:         "0x7f000001 is a non-canonical numeric form of 127.0.0.1",
	}, []*hitRecorder{r4, r6}
}

func noHits(t *testing.T, rs ...*hitRecorder) {
	t.Helper()
	for _, r := range rs {
		if got := r.requests(); len(got) > 0 {
			t.Errorf("a refused destination was reached: %q", got)
		}
	}
}

// TestValidateRefusesInternalURLs validates credentials whose MCP server
// or token endpoint is internal (the fixture allows 127.0.0.1): the probe
// and the refresh report the reason, and nothing reaches the loopback
// servers behind those URLs.
func TestValidateRefusesInternalURLs(t *testing.T) {
	f := newOutboundFixture(t)
	servers, recs := internalURLs(t, "/mcp")
	for u, reason := range servers {
		res := f.validate(t, f.cred(t, u, ""))
		if res.Status != "unknown" || res.MCPProbe == nil || res.MCPProbe.HTTPResponse != nil || !strings.Contains(res.MCPProbe.Message, reason) {
			t.Errorf("validate %s: %+v, probe %+v; want status unknown and a message saying %q", u, res, res.MCPProbe, reason)
		}
	}
	mcpSrv := mcptest.Start(t, mcptest.Options{Token: "at-live"}) // rejects at-secret: a refresh is tried
	endpoints, more := internalURLs(t, "/token")
	for u, reason := range endpoints {
		res := f.validate(t, f.cred(t, mcpSrv.URL()+"?"+u, u))
		if res.Status != "unknown" || res.Refresh == nil || res.Refresh.Status != "connect_error" || !strings.Contains(res.Refresh.Message, reason) {
			t.Errorf("validate with token endpoint %s: %+v, refresh %+v; want connect_error saying %q", u, res, res.Refresh, reason)
		}
	}
	noHits(t, append(recs, more...)...)
	if strings.Contains(f.logs.String(), "rt-secret") || strings.Contains(f.bodies.String(), "rt-secret") {
		t.Error("the refresh token leaked into logs or answers")
	}
}

// TestValidateRedirects: a probe or token endpoint that redirects to
// another origin (another port of the allowed 127.0.0.1) is answered with
// its 3xx; the other origin sees neither the bearer nor the grant.
func TestValidateRedirects(t *testing.T) {
	f := newOutboundFixture(t)
	other := startHitRecorder(t, "127.0.0.1:0")
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()

	res := f.validate(t, f.cred(t, redirect.URL+"/mcp", ""))
	if res.Status != "unknown" || res.MCPProbe == nil || res.MCPProbe.HTTPResponse == nil || res.MCPProbe.HTTPResponse.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("probe through a redirect: %+v, probe %+v", res, res.MCPProbe)
	}
	mcpSrv := mcptest.Start(t, mcptest.Options{Token: "at-live"})
	res = f.validate(t, f.cred(t, mcpSrv.URL(), redirect.URL+"/token"))
	if res.Refresh == nil || res.Refresh.Status != "failed" || res.Refresh.HTTPResponse == nil || res.Refresh.HTTPResponse.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("refresh through a redirect: %+v, refresh %+v", res, res.Refresh)
	}
	noHits(t, other)
}

// TestValidateBodyExcerpt: an MCP server's error page comes back as a
// short, printable excerpt marked truncated.
func TestValidateBodyExcerpt(t *testing.T) {
	f := newOutboundFixture(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<h1>\x1b]0;owned\x07bad gateway</h1>\n"+strings.Repeat("secret internal page ", 500))
	}))
	defer page.Close()
	res := f.validate(t, f.cred(t, page.URL+"/mcp", ""))
	if res.MCPProbe == nil || res.MCPProbe.HTTPResponse == nil {
		t.Fatalf("validation %+v has no http_response", res)
	}
	h := res.MCPProbe.HTTPResponse
	if h.StatusCode != http.StatusBadGateway || h.ContentType != "text/html" || !h.BodyTruncated || len(h.Body) > 256 || !utf8.ValidString(h.Body) {
		t.Errorf("http_response %+v (%d bytes)", h, len(h.Body))
	}
	if !strings.HasPrefix(h.Body, "<h1>\ufffd]0;owned\ufffdbad gateway</h1> secret") {
		t.Errorf("body %q: control characters not replaced", h.Body)
	}
}
