package connector

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/mcptest"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

// oauthStore is what the refresh tests need of a store.
type oauthStore interface {
	VaultStore
	CreateVault(ctx context.Context, v ma.Vault) error
	CreateCredential(ctx context.Context, c store.Credential) error
}

// expiredOAuth stores, in a new vault of st, an mcp_oauth credential for
// serverURL whose access token "at-1" is within the refresh skew of its
// expiry and whose refresh token is "rt-1", refreshed at endpoint.
func expiredOAuth(t *testing.T, st oauthStore, keys *vault.Keyring, serverURL, endpoint string) store.Credential {
	t.Helper()
	ctx := context.Background()
	now := ma.Time(time.Now())
	vaultID := ids.New(ids.Vault)
	if err := st.CreateVault(ctx, ma.Vault{ID: vaultID, Type: "vault", Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	exp := ma.Time(time.Now().Add(10 * time.Second))
	c := store.Credential{Credential: ma.Credential{ID: ids.New(ids.Credential), Type: "vault_credential", VaultID: vaultID, Metadata: ma.Metadata{},
		Auth: ma.CredentialAuth{Type: ma.AuthMCPOAuth, MCPServerURL: serverURL, ExpiresAt: &exp,
			Refresh: &ma.OAuthRefresh{ClientID: "cid", TokenEndpoint: endpoint, TokenEndpointAuth: ma.TokenEndpointAuth{Type: "none"}}},
		CreatedAt: now, UpdatedAt: now}}
	var err error
	if c.Sealed, err = keys.SealSecrets(vault.Secrets{AccessToken: "at-1", RefreshToken: "rt-1"}, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func newKeyring(t *testing.T) *vault.Keyring {
	t.Helper()
	key := make([]byte, vault.KeySize)
	rand.Read(key)
	keys, err := vault.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestReplicasRefreshOnce: two replicas (each its own connection pool to
// one PostgreSQL database and its own VaultCredentials) asked at once for
// an expired mcp_oauth token refresh it once between them: the token
// endpoint, which rotates refresh tokens and refuses a spent one, is
// called once, and every caller gets the one new access token.
func TestReplicasRefreshOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDB(t)
	keys := newKeyring(t)
	endpoint := mcptest.StartTokenEndpoint(t, 2*time.Second)
	var replicas []*VaultCredentials
	var first *postgres.Store
	for range 2 {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if first == nil {
			first = st
		}
		replicas = append(replicas, &VaultCredentials{Store: st, Keyring: keys, HTTPClient: guardedClient(t, loopback)})
	}
	const serverURL = "https://mcp.example.com/mcp"
	c := expiredOAuth(t, first, keys, serverURL, endpoint.URL())

	start := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() {
			<-start
			got[i], errs[i] = replicas[i%2].Token(ctx, []string{c.VaultID}, serverURL)
		})
	}
	close(start)
	wg.Wait()
	uses, refused := endpoint.Uses()
	for i := range got {
		if errs[i] != nil || got[i] != "at-2" {
			t.Errorf("caller %d (replica %d): %q, %v", i, i%2, got[i], errs[i])
		}
	}
	if uses != 1 || len(refused) != 0 {
		t.Fatalf("the token endpoint got %d requests and refused %q; want one refresh", uses, refused)
	}
	stored, err := first.GetCredential(ctx, c.VaultID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := keys.OpenSecrets(stored.Sealed, c.ID)
	if sec.AccessToken != "at-2" || sec.RefreshToken != "rt-2" || !stored.RefreshUntil.IsZero() {
		t.Fatalf("stored %q/%q, claim until %v; want at-2/rt-2 and no claim", sec.AccessToken, sec.RefreshToken, stored.RefreshUntil)
	}
}

// claimed opens a SQLite store holding an expired credential whose
// refresh another process claimed, as a replica that died mid-refresh
// leaves it, and a VaultCredentials over it whose token endpoint counts
// its calls. It runs in a synctest bubble.
func claimed(t *testing.T) (*sqlite.Store, *VaultCredentials, store.Credential, *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := newKeyring(t)
	hits := &atomic.Int64{}
	endpoint := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		if r.FormValue("refresh_token") != "rt-1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		io.WriteString(w, fmt.Sprintf(`{"access_token":"at-%d","refresh_token":"rt-%d","expires_in":3600}`, n+1, n+1))
	})
	c := expiredOAuth(t, st, keys, "https://mcp.example.com/mcp", "https://auth.example.com/token")
	c, err = st.SwapCredential(ctx, c.VaultID, c.ID, c.Version, func(cur *store.Credential) error {
		cur.RefreshUntil = time.Now().Add(refreshClaim)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	vc := &VaultCredentials{Store: st, Keyring: keys, HTTPClient: &http.Client{Transport: handlerTransport{endpoint}}}
	return st, vc, c, hits
}

// TestRefreshClaimOfADeadReplica: a claim on a credential's refresh that
// its holder never completes (it died) holds others off until it
// expires; then one of them refreshes.
func TestRefreshClaimOfADeadReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, vc, c, hits := claimed(t)
		began := time.Now()
		tok, err := vc.Token(context.Background(), []string{c.VaultID}, c.Auth.MCPServerURL)
		if err != nil || tok != "at-2" || hits.Load() != 1 {
			t.Fatalf("Token = %q, %v after %d refreshes", tok, err, hits.Load())
		}
		if waited := time.Since(began); waited < refreshClaim-time.Second {
			t.Fatalf("refreshed after %v, before the claim (%v) expired", waited, refreshClaim)
		}
	})
}

// TestRefreshClaimHolderFinishes: a caller that finds another replica
// refreshing waits for it and takes the token it stores, without a
// request of its own.
func TestRefreshClaimHolderFinishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, vc, c, hits := claimed(t)
		go func() {
			time.Sleep(3 * time.Second)
			sealed, _ := vc.Keyring.SealSecrets(vault.Secrets{AccessToken: "at-other", RefreshToken: "rt-other"}, c.ID)
			exp := ma.Time(time.Now().Add(time.Hour))
			if _, err := st.SwapCredential(ctx, c.VaultID, c.ID, c.Version, func(cur *store.Credential) error {
				cur.Sealed, cur.Auth.ExpiresAt, cur.RefreshUntil = sealed, &exp, time.Time{}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
		tok, err := vc.Token(ctx, []string{c.VaultID}, c.Auth.MCPServerURL)
		if err != nil || tok != "at-other" || hits.Load() != 0 {
			t.Fatalf("Token = %q, %v after %d refreshes; want the other replica's token and none", tok, err, hits.Load())
		}
	})
}
