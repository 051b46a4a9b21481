package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/mcptest"
	"github.com/reinsdev/reins/internal/packages"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// recorder keeps every response body the client receives.
type recorder struct {
	next http.RoundTripper
	buf  *syncBuffer
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.buf.Write(b)
	r.buf.Write([]byte("\n"))
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

type vaultFixture struct {
	client anthropic.Client
	url    string
	dir    string
	logs   *syncBuffer
	bodies *syncBuffer
}

func newVaultFixture(t *testing.T) *vaultFixture {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, err := vault.LoadKey("", dir)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := vault.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	f := &vaultFixture{dir: dir, logs: &syncBuffer{}, bodies: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := New(Config{Store: st, Auth: &Authenticator{Keys: st, Bootstrap: "sk-test"}, Logger: log, ValidatePackages: packages.Validate})
	// The tests' MCP servers and token endpoints listen on loopback.
	probe := (&netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).Client(5 * time.Second)
	srv.vaultRoutes(VaultConfig{Keyring: keys, ProbeClient: probe})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		probe.CloseIdleConnections()
	})
	f.url = hs.URL
	hc := &http.Client{Transport: recorder{next: http.DefaultTransport, buf: f.bodies}}
	f.client = anthropic.NewClient(option.WithBaseURL(hs.URL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	return f
}

// raw sends a JSON request and returns the status and decoded envelope
// message.
func (f *vaultFixture) raw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	req.Header.Set("x-api-key", "sk-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	f.bodies.Write(b)
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(b, &env)
	if resp.StatusCode >= 400 && env.Type != "error" {
		t.Fatalf("%s %s: %d without an error envelope: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, env.Error.Message
}

func apiStatus(err error) int {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

func TestVaultLifecycle(t *testing.T) {
	f := newVaultFixture(t)
	ctx := context.Background()
	v, err := f.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "prod", Metadata: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.ID, "vlt_") || v.DisplayName != "prod" || v.Metadata["team"] != "a" || !v.ArchivedAt.IsZero() {
		t.Fatalf("created %+v", v)
	}
	got, err := f.client.Beta.Vaults.Get(ctx, v.ID, anthropic.BetaVaultGetParams{})
	if err != nil || got.ID != v.ID {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	up, err := f.client.Beta.Vaults.Update(ctx, v.ID, anthropic.BetaVaultUpdateParams{DisplayName: anthropic.String("staging"), Metadata: map[string]string{"env": "s"}})
	if err != nil || up.DisplayName != "staging" || up.Metadata["env"] != "s" || up.Metadata["team"] != "a" {
		t.Fatalf("Update = %+v, %v", up, err)
	}
	for range 3 {
		if _, err := f.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "more"}); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	iter := f.client.Beta.Vaults.ListAutoPaging(ctx, anthropic.BetaVaultListParams{Limit: anthropic.Int(2)})
	for iter.Next() {
		n++
	}
	if iter.Err() != nil || n != 4 {
		t.Fatalf("listed %d vaults (%v), want 4", n, iter.Err())
	}
	arch, err := f.client.Beta.Vaults.Archive(ctx, v.ID, anthropic.BetaVaultArchiveParams{})
	if err != nil || arch.ArchivedAt.IsZero() {
		t.Fatalf("Archive = %+v, %v", arch, err)
	}
	if _, err := f.client.Beta.Vaults.Update(ctx, v.ID, anthropic.BetaVaultUpdateParams{DisplayName: anthropic.String("x")}); apiStatus(err) != 409 {
		t.Fatalf("update archived vault: %v", err)
	}
	del, err := f.client.Beta.Vaults.Delete(ctx, v.ID, anthropic.BetaVaultDeleteParams{})
	if err != nil || del.ID != v.ID || del.Type != "vault_deleted" {
		t.Fatalf("Delete = %+v, %v", del, err)
	}
	if _, err := f.client.Beta.Vaults.Get(ctx, v.ID, anthropic.BetaVaultGetParams{}); apiStatus(err) != 404 {
		t.Fatalf("get deleted vault: %v", err)
	}
}

// secrets used by the tests; none may appear anywhere but in requests.
const (
	secBearer  = "sb-secret-4f1c2d"
	secAccess  = "at-secret-8a7b6c"
	secRefresh = "rt-secret-1d2e3f"
	secClient  = "cs-secret-9e8d7c"
	secEnv     = "env-secret-5b4a3c"
	secNewTok  = "sb-rotated-6e5f4a"
)

func TestCredentialsNeverRevealSecrets(t *testing.T) {
	f := newVaultFixture(t)
	ctx := context.Background()
	v, err := f.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "v"})
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := f.client.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		DisplayName: anthropic.String("github"),
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: "https://mcp.example.com/mcp", Token: secBearer}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(bearer.ID, "vcrd_") || bearer.VaultID != v.ID || bearer.Auth.Type != "static_bearer" || bearer.Auth.MCPServerURL != "https://mcp.example.com/mcp" || bearer.DisplayName != "github" {
		t.Fatalf("bearer = %+v", bearer)
	}
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	oauth, err := f.client.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthCreateParams{
			MCPServerURL: "https://linear.example.com/mcp", AccessToken: secAccess, ExpiresAt: anthropic.Time(exp),
			Refresh: anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "client-1", RefreshToken: secRefresh, TokenEndpoint: "https://auth.example.com/token",
				Scope:             anthropic.String("read"),
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{OfClientSecretPost: &anthropic.BetaManagedAgentsTokenEndpointAuthPostParam{ClientSecret: secClient}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if oauth.Auth.Type != "mcp_oauth" || !oauth.Auth.ExpiresAt.Equal(exp) || oauth.Auth.Refresh.ClientID != "client-1" ||
		oauth.Auth.Refresh.TokenEndpointAuth.Type != "client_secret_post" || oauth.Auth.Refresh.Scope != "read" {
		t.Fatalf("oauth = %s", oauth.RawJSON())
	}
	env, err := f.client.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfEnvironmentVariable: &anthropic.BetaManagedAgentsEnvironmentVariableCreateParams{
			SecretName: "API_KEY", SecretValue: secEnv,
			Networking: anthropic.BetaManagedAgentsCredentialNetworkingParamsOfLimited([]string{"api.example.com", "*.example.org", "192.0.2.1"})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if env.Auth.SecretName != "API_KEY" || env.Auth.Networking.Type != "limited" || len(env.Auth.Networking.AllowedHosts) != 3 {
		t.Fatalf("env = %s", env.RawJSON())
	}

	// Read them back every way.
	for _, id := range []string{bearer.ID, oauth.ID, env.ID} {
		if _, err := f.client.Beta.Vaults.Credentials.Get(ctx, id, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := f.client.Beta.Vaults.Credentials.List(ctx, v.ID, anthropic.BetaVaultCredentialListParams{})
	if err != nil || len(page.Data) != 3 {
		t.Fatalf("List = %v, %v", page, err)
	}
	up, err := f.client.Beta.Vaults.Credentials.Update(ctx, bearer.ID, anthropic.BetaVaultCredentialUpdateParams{VaultID: v.ID,
		Auth: anthropic.BetaVaultCredentialUpdateParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerUpdateParams{Token: anthropic.String(secNewTok)}}})
	if err != nil || up.Auth.MCPServerURL != "https://mcp.example.com/mcp" {
		t.Fatalf("Update = %+v, %v", up, err)
	}
	if _, err := f.client.Beta.Vaults.Credentials.Update(ctx, env.ID, anthropic.BetaVaultCredentialUpdateParams{VaultID: v.ID,
		Auth: anthropic.BetaVaultCredentialUpdateParamsAuthUnion{OfEnvironmentVariable: &anthropic.BetaManagedAgentsEnvironmentVariableUpdateParams{
			Networking: anthropic.BetaManagedAgentsCredentialNetworkingParamsUnion{OfUnrestricted: &anthropic.BetaManagedAgentsUnrestrictedCredentialNetworkingParams{}}}}}); err != nil {
		t.Fatal(err)
	}
	arch, err := f.client.Beta.Vaults.Credentials.Archive(ctx, oauth.ID, anthropic.BetaVaultCredentialArchiveParams{VaultID: v.ID})
	if err != nil || arch.ArchivedAt.IsZero() {
		t.Fatalf("Archive = %+v, %v", arch, err)
	}
	if page, _ := f.client.Beta.Vaults.Credentials.List(ctx, v.ID, anthropic.BetaVaultCredentialListParams{}); len(page.Data) != 2 {
		t.Fatalf("archived credential listed by default: %d", len(page.Data))
	}
	if page, _ := f.client.Beta.Vaults.Credentials.List(ctx, v.ID, anthropic.BetaVaultCredentialListParams{IncludeArchived: anthropic.Bool(true)}); len(page.Data) != 3 {
		t.Fatalf("include_archived: %d", len(page.Data))
	}
	del, err := f.client.Beta.Vaults.Credentials.Delete(ctx, env.ID, anthropic.BetaVaultCredentialDeleteParams{VaultID: v.ID})
	if err != nil || del.Type != "vault_credential_deleted" {
		t.Fatalf("Delete = %+v, %v", del, err)
	}

	// Bad input, to see that error messages do not echo secrets either.
	f.raw(t, "POST", "/v1/vaults/"+v.ID+"/credentials", `{"auth":{"type":"static_bearer","mcp_server_url":"ftp://x","token":"`+secBearer+`"}}`)
	f.raw(t, "POST", "/v1/vaults/"+v.ID+"/credentials", `{"auth":{"type":"static_bearer","mcp_server_url":"https://x","token":"`+secBearer+`","access_token":"`+secAccess+`"}}`)

	var leaks []string
	db := readDB(t, f.dir)
	for _, s := range []string{secBearer, secAccess, secRefresh, secClient, secEnv, secNewTok} {
		for where, text := range map[string]string{"API response": f.bodies.String(), "log": f.logs.String(), "database file": db} {
			if strings.Contains(text, s) {
				leaks = append(leaks, s+" in "+where)
			}
		}
	}
	if len(leaks) > 0 {
		t.Fatalf("secrets leaked: %v", leaks)
	}
	if !strings.Contains(db, bearer.ID) {
		t.Fatal("database read is empty; the leak check proves nothing")
	}
}

// readDB returns the bytes of the SQLite files (main, WAL) as a string.
func readDB(t *testing.T, dir string) string {
	t.Helper()
	var all []byte
	files, _ := filepath.Glob(filepath.Join(dir, "reins.db*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return string(all)
}

func TestCredentialBadInput(t *testing.T) {
	f := newVaultFixture(t)
	ctx := context.Background()
	v, err := f.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "v"})
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/vaults/" + v.ID + "/credentials"
	_, _ = f.raw(t, "POST", base, `{"auth":{"type":"static_bearer","mcp_server_url":"https://a.example.com/mcp","token":"t0"}}`)
	var bearerID string
	{
		page, err := f.client.Beta.Vaults.Credentials.List(ctx, v.ID, anthropic.BetaVaultCredentialListParams{})
		if err != nil || len(page.Data) != 1 {
			t.Fatal(err)
		}
		bearerID = page.Data[0].ID
	}
	_, _ = f.raw(t, "POST", base, `{"auth":{"type":"environment_variable","secret_name":"TOKEN","secret_value":"x","networking":{"type":"unrestricted"}}}`)
	page, _ := f.client.Beta.Vaults.Credentials.List(ctx, v.ID, anthropic.BetaVaultCredentialListParams{})
	envID := page.Data[1].ID

	tests := []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"POST", "/v1/vaults", `{}`, 400, "display_name: required"},
		{"POST", "/v1/vaults", `{"display_name":""}`, 400, "display_name: required"},
		{"GET", "/v1/vaults/vlt_missing", ``, 404, "vault vlt_missing not found"},
		{"POST", "/v1/vaults/vlt_missing/credentials", `{"auth":{"type":"static_bearer","mcp_server_url":"https://x","token":"t"}}`, 404, "vault vlt_missing not found"},
		{"GET", "/v1/vaults/vlt_missing/credentials", ``, 404, "vault vlt_missing not found"},
		{"GET", base + "/vcrd_missing", ``, 404, "credential vcrd_missing not found in vault " + v.ID},
		{"POST", base, `{}`, 400, "auth: required"},
		{"POST", base, `{"auth":{"type":"api_key"}}`, 400, `auth.type: must be mcp_oauth, static_bearer or environment_variable; got "api_key"`},
		{"POST", base, `{"auth":{"type":"static_bearer","token":"t"}}`, 400, "auth.mcp_server_url: required"},
		{"POST", base, `{"auth":{"type":"static_bearer","mcp_server_url":"https://x"}}`, 400, "auth.token: required"},
		{"POST", base, `{"auth":{"type":"static_bearer","mcp_server_url":"https://x","token":"t","secret_name":"A"}}`, 400, "auth.secret_name: unknown field for static_bearer credentials"},
		{"POST", base, `{"auth":{"type":"mcp_oauth","mcp_server_url":"https://x","access_token":"t","expires_at":"2001-01-01T00:00:00Z"}}`, 400, "auth.expires_at: must be in the future"},
		{"POST", base, `{"auth":{"type":"mcp_oauth","mcp_server_url":"https://x","access_token":"t","refresh":{"client_id":"c","refresh_token":"r","token_endpoint":"https://t"}}}`, 400, "auth.refresh.token_endpoint_auth: required"},
		{"POST", base, `{"auth":{"type":"mcp_oauth","mcp_server_url":"https://x","access_token":"t","refresh":{"client_id":"c","refresh_token":"r","token_endpoint":"https://t","token_endpoint_auth":{"type":"client_secret_basic"}}}}`, 400, "auth.refresh.token_endpoint_auth.client_secret: required"},
		{"POST", base, `{"auth":{"type":"environment_variable","secret_name":"1BAD","secret_value":"v","networking":{"type":"unrestricted"}}}`, 400, "auth.secret_name: must be an environment variable name"},
		{"POST", base, `{"auth":{"type":"environment_variable","secret_name":"A","secret_value":"v"}}`, 400, "auth.networking: required"},
		{"POST", base, `{"auth":{"type":"environment_variable","secret_name":"A","secret_value":"v","networking":{"type":"limited","allowed_hosts":["https://api.example.com/x"]}}}`, 400, "auth.networking.allowed_hosts[0]: must be a bare host name"},
		{"POST", base, `{"auth":{"type":"environment_variable","secret_name":"A","secret_value":"v","networking":{"type":"limited","allowed_hosts":["::1"]}}}`, 400, "auth.networking.allowed_hosts[0]: IPv6 addresses are not accepted"},
		{"POST", base, `{"auth":{"type":"environment_variable","secret_name":"A","secret_value":"v","networking":{"type":"limited","allowed_hosts":["a1","a2","a3","a4","a5","a6","a7","a8","a9","b1","b2","b3","b4","b5","b6","b7","b8"]}}}`, 400, "auth.networking.allowed_hosts: must have 1 to 16 hosts, got 17"},
		{"POST", base, `{"auth":{"type":"static_bearer","mcp_server_url":"https://a.example.com/mcp","token":"t1"}}`, 409, "auth.mcp_server_url: the vault already has a live credential for https://a.example.com/mcp"},
		{"POST", base, `{"auth":{"type":"environment_variable","secret_name":"TOKEN","secret_value":"v","networking":{"type":"unrestricted"}}}`, 409, `auth.secret_name: the vault already has a live credential named "TOKEN"`},
		{"POST", base + "/" + bearerID, `{"auth":{"type":"mcp_oauth","access_token":"x"}}`, 400, `auth.type: credential ` + bearerID + ` is a static_bearer credential; its type cannot change to "mcp_oauth"`},
		{"POST", base + "/" + bearerID, `{"auth":{"type":"static_bearer","mcp_server_url":"https://b.example.com"}}`, 400, "auth.mcp_server_url: immutable"},
		{"POST", base + "/" + envID, `{"auth":{"type":"environment_variable","secret_name":"OTHER"}}`, 400, "auth.secret_name: immutable"},
		{"POST", base + "/" + bearerID, `{"auth":{"type":"static_bearer","token":""}}`, 400, "auth.token: must not be empty"},
		{"POST", base + "/" + bearerID + "/mcp_oauth_validate", ``, 400, "only mcp_oauth credentials can be validated"},
		{"GET", "/v1/vaults?limit=0", ``, 400, "limit: must be an integer from 1 to 100"},
	}
	for _, tt := range tests {
		status, msg := f.raw(t, tt.method, tt.path, tt.body)
		if status != tt.status || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s %s %s:\n got %d %q\nwant %d %q", tt.method, tt.path, tt.body, status, msg, tt.status, tt.msg)
		}
	}
	// Archived credentials and vaults are read-only.
	f.raw(t, "POST", base+"/"+bearerID+"/archive", ``)
	if status, msg := f.raw(t, "POST", base+"/"+bearerID, `{"display_name":"x"}`); status != 409 || !strings.Contains(msg, "archived") {
		t.Errorf("update archived credential: %d %q", status, msg)
	}
	f.raw(t, "POST", "/v1/vaults/"+v.ID+"/archive", ``)
	if status, msg := f.raw(t, "POST", base, `{"auth":{"type":"static_bearer","mcp_server_url":"https://c","token":"t"}}`); status != 409 || !strings.Contains(msg, "archived") {
		t.Errorf("credential in archived vault: %d %q", status, msg)
	}
}

func TestMCPOAuthValidate(t *testing.T) {
	f := newVaultFixture(t)
	ctx := context.Background()
	mcpSrv := mcptest.Start(t, mcptest.Options{Token: "at-live"})
	var refreshes sync.Map
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		rt := r.PostForm.Get("refresh_token")
		refreshes.Store(rt, r.PostForm.Get("client_secret"))
		w.Header().Set("Content-Type", "application/json")
		if rt != "rt-good" {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"refresh token `+rt+` was revoked"}`)
			return
		}
		io.WriteString(w, `{"access_token":"at-live","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-rotated"}`)
	}))
	defer tokenSrv.Close()
	v, _ := f.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "v"})

	newCred := func(url, access, refresh string) string {
		t.Helper()
		p := &anthropic.BetaManagedAgentsMCPOAuthCreateParams{MCPServerURL: url, AccessToken: access}
		if refresh != "" {
			p.Refresh = anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "c", RefreshToken: refresh, TokenEndpoint: tokenSrv.URL,
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{OfClientSecretPost: &anthropic.BetaManagedAgentsTokenEndpointAuthPostParam{ClientSecret: "cs-1"}}}
		}
		c, err := f.client.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: p}})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	validate := func(id string) *anthropic.BetaManagedAgentsCredentialValidation {
		t.Helper()
		res, err := f.client.Beta.Vaults.Credentials.MCPOAuthValidate(ctx, id, anthropic.BetaVaultCredentialMCPOAuthValidateParams{VaultID: v.ID})
		if err != nil {
			t.Fatal(err)
		}
		if res.Type != "vault_credential_validation" || res.CredentialID != id || res.VaultID != v.ID || res.ValidatedAt.IsZero() {
			t.Fatalf("validation = %s", res.RawJSON())
		}
		return res
	}

	t.Run("valid", func(t *testing.T) {
		res := validate(newCred(mcpSrv.URL(), "at-live", ""))
		if res.Status != "valid" || res.HasRefreshToken || res.JSON.MCPProbe.Raw() != "null" {
			t.Fatalf("valid token: %s", res.RawJSON())
		}
	})
	t.Run("invalid without refresh", func(t *testing.T) {
		res := validate(newCred(mcpSrv.URL()+"?a", "at-wrong", ""))
		if res.Status != "invalid" || res.Refresh.Status != "no_refresh_token" || res.MCPProbe.Method != "initialize" || res.MCPProbe.HTTPResponse.StatusCode != 401 {
			t.Fatalf("wrong token: %s", res.RawJSON())
		}
	})
	t.Run("refreshed", func(t *testing.T) {
		id := newCred(mcpSrv.URL()+"?b", "at-expired", "rt-good")
		res := validate(id)
		if res.Status != "valid" || !res.HasRefreshToken || res.Refresh.Status != "succeeded" {
			t.Fatalf("refresh: %s", res.RawJSON())
		}
		if cs, _ := refreshes.Load("rt-good"); cs != "cs-1" {
			t.Fatalf("client_secret_post sent %v", cs)
		}
		// The new token was stored: a second validation needs no refresh.
		if res := validate(id); res.Status != "valid" || res.JSON.Refresh.Raw() != "null" {
			t.Fatalf("after refresh: %s", res.RawJSON())
		}
		c, _ := f.client.Beta.Vaults.Credentials.Get(ctx, id, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
		if c.Auth.ExpiresAt.Before(time.Now().Add(50 * time.Minute)) {
			t.Fatalf("expires_at not updated from expires_in: %v", c.Auth.ExpiresAt)
		}
	})
	t.Run("refresh fails", func(t *testing.T) {
		res := validate(newCred(mcpSrv.URL()+"?c", "at-wrong", "rt-revoked-7c6b"))
		if res.Status != "invalid" || res.Refresh.Status != "failed" || res.Refresh.HTTPResponse.StatusCode != 400 {
			t.Fatalf("failed refresh: %s", res.RawJSON())
		}
		if strings.Contains(res.RawJSON(), "rt-revoked-7c6b") || !strings.Contains(res.Refresh.HTTPResponse.Body, "invalid_grant") {
			t.Fatalf("refresh body not scrubbed: %q", res.Refresh.HTTPResponse.Body)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		res := validate(newCred("http://127.0.0.1:1/mcp", "at-live", ""))
		if res.Status != "unknown" || res.MCPProbe.Method != "initialize" || res.JSON.MCPProbe.Raw() == "null" {
			t.Fatalf("unreachable: %s", res.RawJSON())
		}
	})
}
