package connector

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

// handlerTransport serves requests with an http.Handler in memory, so
// that token endpoint calls stay inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// TestTokenRefreshedOnExpiry runs on synctest's fake clock: the token is
// used as it is until 30 s before it expires, then refreshed once (even
// by concurrent callers) and the new one stored.
func TestTokenRefreshedOnExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		key := make([]byte, vault.KeySize)
		rand.Read(key)
		keys, _ := vault.NewKeyring(key)

		var hits atomic.Int64
		endpoint := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			if r.FormValue("client_id") != "cid" || r.FormValue("refresh_token") != "rt-1" || r.FormValue("scope") != "tools" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			io.WriteString(w, `{"access_token":"at-2","expires_in":3600}`)
		})
		vc := &VaultCredentials{Store: st, Keyring: keys, HTTPClient: &http.Client{Transport: handlerTransport{endpoint}}}

		vaultID := ids.New(ids.Vault)
		now := ma.Time(time.Now())
		if err := st.CreateVault(ctx, ma.Vault{ID: vaultID, Type: "vault", Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		exp := ma.Time(time.Now().Add(time.Hour))
		scope := "tools"
		c := store.Credential{Credential: ma.Credential{ID: ids.New(ids.Credential), Type: "vault_credential", VaultID: vaultID, Metadata: ma.Metadata{},
			Auth: ma.CredentialAuth{Type: ma.AuthMCPOAuth, MCPServerURL: "https://mcp.example.com/mcp", ExpiresAt: &exp,
				Refresh: &ma.OAuthRefresh{ClientID: "cid", TokenEndpoint: "https://auth.example.com/token", TokenEndpointAuth: ma.TokenEndpointAuth{Type: "none"}, Scope: &scope}},
			CreatedAt: now, UpdatedAt: now}}
		c.Sealed, _ = keys.SealSecrets(vault.Secrets{AccessToken: "at-1", RefreshToken: "rt-1"}, c.ID)
		if err := st.CreateCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
		token := func() string {
			t.Helper()
			tok, err := vc.Token(ctx, []string{"vlt_other", vaultID}, "HTTPS://MCP.example.com:443/mcp/")
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		if tok := token(); tok != "at-1" || hits.Load() != 0 {
			t.Fatalf("fresh token: %q after %d refreshes", tok, hits.Load())
		}
		time.Sleep(59 * time.Minute)
		if tok := token(); tok != "at-1" || hits.Load() != 0 {
			t.Fatalf("a minute before expiry: %q after %d refreshes", tok, hits.Load())
		}
		time.Sleep(45 * time.Second) // within the 30 s skew
		var wg sync.WaitGroup
		got := make([]string, 5)
		for i := range got {
			wg.Go(func() { got[i] = token() })
		}
		wg.Wait()
		for _, tok := range got {
			if tok != "at-2" {
				t.Fatalf("tokens after expiry: %q", got)
			}
		}
		if hits.Load() != 1 {
			t.Fatalf("%d refreshes for concurrent callers, want 1", hits.Load())
		}
		stored, _ := st.GetCredential(ctx, vaultID, c.ID)
		if want := ma.Time(time.Now().Add(time.Hour)); stored.Auth.ExpiresAt == nil || *stored.Auth.ExpiresAt != want {
			t.Fatalf("stored expires_at %v, want %s", stored.Auth.ExpiresAt, want)
		}
		sec, _ := keys.OpenSecrets(stored.Sealed, c.ID)
		if sec.AccessToken != "at-2" || sec.RefreshToken != "rt-1" {
			t.Fatalf("stored secrets %+v (the refresh token was not rotated, so it is kept)", sec)
		}
	})
}

func TestNoCredential(t *testing.T) {
	v := newVaults(t)
	v.bearer(t, "https://a.example.com/mcp", "t")
	_, err := v.creds().Token(context.Background(), []string{v.vaultID}, "https://b.example.com/mcp")
	if err == nil || !strings.Contains(err.Error(), "b.example.com") {
		t.Fatalf("Token for an unmatched URL: %v", err)
	}
	if !errorsIs(err, ErrNoCredential) {
		t.Fatalf("%v does not wrap ErrNoCredential", err)
	}
}

func TestNormalizeURL(t *testing.T) {
	same := [][2]string{
		{"https://Example.COM/mcp", "https://example.com/mcp/"},
		{"https://example.com:443/mcp", "https://example.com/mcp"},
		{"http://example.com:80/", "http://example.com"},
	}
	for _, p := range same {
		if NormalizeURL(p[0]) != NormalizeURL(p[1]) {
			t.Errorf("%q and %q differ: %q, %q", p[0], p[1], NormalizeURL(p[0]), NormalizeURL(p[1]))
		}
	}
	differ := [][2]string{
		{"https://example.com/mcp", "https://example.com/MCP"},
		{"https://example.com/mcp", "http://example.com/mcp"},
		{"https://example.com:8443/mcp", "https://example.com/mcp"},
		{"https://example.com/mcp?tenant=a", "https://example.com/mcp?tenant=b"},
	}
	for _, p := range differ {
		if NormalizeURL(p[0]) == NormalizeURL(p[1]) {
			t.Errorf("%q and %q match", p[0], p[1])
		}
	}
}

func TestScrub(t *testing.T) {
	got := Scrub(`{"error":"invalid_grant","refresh_token":"abc","token_type":"Bearer","note":"key sk-123456 leaked"}`, "sk-123456")
	if strings.Contains(got, "abc") || strings.Contains(got, "sk-123456") || !strings.Contains(got, "invalid_grant") || !strings.Contains(got, "Bearer") {
		t.Fatalf("Scrub = %s", got)
	}
}
