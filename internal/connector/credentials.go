package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

// Credentials finds the bearer token the pool sends to an MCP server.
type Credentials interface {
	// Token returns the token for serverURL from the first of vaultIDs
	// that holds a live credential for that URL. It returns an error
	// wrapping ErrNoCredential when none does, and one wrapping
	// ErrCredentialUnusable (with ErrCredentialExpired or a *RefreshError)
	// when the matching credential cannot be used. Other errors (a store
	// failure) are internal.
	Token(ctx context.Context, vaultIDs []string, serverURL string) (string, error)
}

// Refresher is implemented by Credentials that can refresh a token the MCP
// server rejected although it had not expired. The pool calls it once
// after a 401.
type Refresher interface {
	RefreshToken(ctx context.Context, vaultIDs []string, serverURL string) (string, error)
}

// Errors of Credentials.
var (
	ErrNoCredential      = errors.New("no credential in the session's vaults matches the server URL")
	ErrCredentialExpired = errors.New("the credential's access token has expired and it has no refresh configuration")
)

// VaultStore is what VaultCredentials needs of the store.
type VaultStore interface {
	ListCredentials(ctx context.Context, vaultID string, q store.ListQuery) ([]store.Item[store.Credential], error)
	GetCredential(ctx context.Context, vaultID, id string) (store.Credential, error)
	SwapCredential(ctx context.Context, vaultID, id string, version int64, fn func(cur *store.Credential) error) (store.Credential, error)
}

// VaultCredentials is Credentials over the store's vaults: static_bearer
// tokens as they are, mcp_oauth access tokens refreshed through their token
// endpoint when they expire (the new token is sealed and stored), once
// among all the processes sharing the store (see [RefreshCredential]).
type VaultCredentials struct {
	Store   VaultStore
	Keyring *vault.Keyring
	// HTTPClient calls token endpoints. Build it with
	// netguard.Guard.Client; nil means a client of the zero Guard, which
	// refuses internal addresses.
	HTTPClient *http.Client
	// Skew refreshes tokens this long before they expire (default 30 s).
	Skew   time.Duration
	Logger *slog.Logger

	mu    sync.Mutex             // guards locks
	locks map[string]*sync.Mutex // per credential: one refresh at a time in this process
}

var _ Refresher = (*VaultCredentials)(nil)

// Token implements Credentials.
func (v *VaultCredentials) Token(ctx context.Context, vaultIDs []string, serverURL string) (string, error) {
	return v.token(ctx, vaultIDs, serverURL, false)
}

// RefreshToken implements Refresher: it refreshes an mcp_oauth token even
// if it has not expired.
func (v *VaultCredentials) RefreshToken(ctx context.Context, vaultIDs []string, serverURL string) (string, error) {
	return v.token(ctx, vaultIDs, serverURL, true)
}

func (v *VaultCredentials) token(ctx context.Context, vaultIDs []string, serverURL string, force bool) (string, error) {
	c, err := v.find(ctx, vaultIDs, serverURL)
	if err != nil {
		return "", err
	}
	sec, err := v.Keyring.OpenSecrets(c.Sealed, c.ID)
	if err != nil {
		return "", fmt.Errorf("credential %s: %w: %w", c.ID, ErrCredentialUnusable, err)
	}
	if c.Auth.Type == ma.AuthStaticBearer {
		if force {
			return "", fmt.Errorf("credential %s: %w: the server rejected its static token", c.ID, ErrCredentialUnusable)
		}
		return sec.Token, nil
	}
	if !force && !v.expired(c.Auth.ExpiresAt) {
		return sec.AccessToken, nil
	}
	if c.Auth.Refresh == nil || sec.RefreshToken == "" {
		if force {
			return "", fmt.Errorf("credential %s: %w: the server rejected its access token and it has no refresh configuration", c.ID, ErrCredentialUnusable)
		}
		return "", fmt.Errorf("credential %s: %w: %w", c.ID, ErrCredentialUnusable, ErrCredentialExpired)
	}
	lock := v.lock(c.ID)
	lock.Lock()
	defer lock.Unlock()
	r := refresher{client: v.HTTPClient, st: v.Store, keys: v.Keyring, skew: v.skew(), log: v.logger()}
	_, tok, err := r.refresh(ctx, c)
	if err != nil {
		v.logger().Warn("mcp_oauth refresh failed", "credential_id", c.ID, "vault_id", c.VaultID, "err", err)
		return "", fmt.Errorf("credential %s: %w: refresh: %w", c.ID, ErrCredentialUnusable, err)
	}
	return tok, nil
}

// RefreshCredential refreshes the mcp_oauth credential c, whose access
// token was found expired or rejected, through its token endpoint, and
// stores the new access token (and refresh token, if the endpoint rotated
// it) sealed, with the new expiry. The processes sharing the store refresh
// a credential one at a time: each claims the refresh at the credential's
// version (compare-and-swap), and one that finds another's claim, or loses
// the race for it, waits for the winner and returns the token the winner
// stored; so a rotating refresh token is spent once. It returns the
// stored credential and its access token. client is as for Refresh.
func RefreshCredential(ctx context.Context, client *http.Client, st VaultStore, keys *vault.Keyring, c store.Credential) (store.Credential, string, error) {
	return refresher{client: client, st: st, keys: keys, skew: defaultSkew}.refresh(ctx, c)
}

// defaultSkew is how long before they expire tokens are refreshed.
const defaultSkew = 30 * time.Second

func (v *VaultCredentials) skew() time.Duration {
	if v.Skew == 0 {
		return defaultSkew
	}
	return v.Skew
}

func (v *VaultCredentials) expired(expiresAt *string) bool {
	return expired(expiresAt, v.skew())
}

// expired reports whether a token expiring at expiresAt (nil: never) is
// within skew of its expiry.
func expired(expiresAt *string, skew time.Duration) bool {
	if expiresAt == nil {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, *expiresAt)
	if err != nil {
		return true
	}
	return !time.Now().Before(t.Add(-skew))
}

func (v *VaultCredentials) lock(id string) *sync.Mutex {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.locks == nil {
		v.locks = map[string]*sync.Mutex{}
	}
	l, ok := v.locks[id]
	if !ok {
		l = &sync.Mutex{}
		v.locks[id] = l
	}
	return l
}

func (v *VaultCredentials) logger() *slog.Logger {
	if v.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return v.Logger
}

// find returns the live MCP credential for serverURL in the first vault
// that has one.
func (v *VaultCredentials) find(ctx context.Context, vaultIDs []string, serverURL string) (store.Credential, error) {
	want := NormalizeURL(serverURL)
	for _, vid := range vaultIDs {
		var after int64
		for {
			items, err := v.Store.ListCredentials(ctx, vid, store.ListQuery{After: after, Limit: 100})
			if err != nil {
				return store.Credential{}, err
			}
			for _, it := range items {
				c := it.Value
				if (c.Auth.Type == ma.AuthStaticBearer || c.Auth.Type == ma.AuthMCPOAuth) && NormalizeURL(c.Auth.MCPServerURL) == want {
					return c, nil
				}
			}
			if len(items) < 100 {
				break
			}
			after = items[len(items)-1].Pos
		}
	}
	return store.Credential{}, fmt.Errorf("%s: %w", serverURL, ErrNoCredential)
}

// NormalizeURL is the form in which credential and server URLs are
// compared: scheme and host lower-cased, default port and trailing slash
// removed. Query and path are compared as they are.
func NormalizeURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return strings.TrimSpace(s)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host = host + ":" + port
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	u.Host = host
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	u.Fragment = ""
	return u.String()
}
