package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/secret"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// KeyPrefix starts every API key reins makes.
const KeyPrefix = "sk-reins-"

// HashKey returns the stored form of an API key: hex SHA-256. Keys carry
// over 200 bits of randomness, so a fast hash is enough (nothing to
// brute-force).
func HashKey(key string) string { return secret.Hash(key) }

// NewKey makes a new random API key.
func NewKey() string {
	return KeyPrefix + ids.New("") + ids.New("")[:16]
}

// KeyCreator stores new API keys; the store is one.
type KeyCreator interface {
	CreateAPIKey(ctx context.Context, k store.APIKey) error
}

// CreateKey makes an admin key, stores its hash and returns the key
// (shown once).
func CreateKey(ctx context.Context, st KeyCreator, name string) (string, store.APIKey, error) {
	return CreateKeyAs(ctx, st, store.APIKey{Name: name, Role: store.RoleAdmin})
}

// CreateKeyAs makes a key like k (name, role, workspace, creator), stores
// its hash and returns the key (shown once).
func CreateKeyAs(ctx context.Context, st KeyCreator, k store.APIKey) (string, store.APIKey, error) {
	key := NewKey()
	k.ID, k.Hash, k.Hint, k.CreatedAt = ids.New(ids.APIKey), HashKey(key), key[len(key)-4:], time.Now().UTC()
	if k.Role == "" {
		k.Role = store.RoleAdmin
	}
	k.Status = store.KeyActive
	return key, k, st.CreateAPIKey(ctx, k)
}

// Authenticator checks API keys: x-api-key or Authorization: Bearer.
type Authenticator struct {
	Keys store.Keys
	// EnvironmentKeys, if set, accepts environment keys (reins_ek_…) of
	// self-hosted environments with a scope limited to their environment.
	EnvironmentKeys EnvironmentKeyStore
	// SessionTokens, if set, accepts the sessions tokens (reins_st_…)
	// the work queue hands to pull workers, with the scope of their
	// session's work ([Server.sessionsScope]).
	SessionTokens SessionTokenStore
	// Machines, if set, recognises machine tokens (reins_mt_…): they
	// authenticate executors on the executor protocol only, so the API
	// answers a valid one 403 permission_error (an unknown or revoked one
	// 401) instead of taking it for a wrong API key.
	Machines MachineTokenStore
	// Bootstrap, if set, is accepted as a key (REINS_API_KEY).
	Bootstrap string
	// CacheTTL is how long a valid API key is remembered without reading
	// the store again (default 2 s; negative disables). A key revoked
	// meanwhile (for example with `reins keys revoke` from another
	// process) stops working within it.
	CacheTTL time.Duration
	// Recheck is how often what an open stream was authenticated with is
	// checked again (default 1 s): a stream ends within it once its key
	// is revoked (or its environment archived), whichever process revoked
	// it. One store read per key and period serves every stream of the key.
	Recheck time.Duration

	mu    sync.Mutex           // guards valid and keys
	valid map[string]time.Time // key hash -> when it was last found valid
	keys  map[string]Principal // API key hash -> its principal, as last read
}

// EnvironmentKeyStore is what an [Authenticator] reads to check
// environment keys: the key, then its environment.
type EnvironmentKeyStore interface {
	EnvironmentKeyByHash(ctx context.Context, hash string) (store.EnvironmentKey, error)
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
}

func (a *Authenticator) cacheTTL() time.Duration {
	if a.CacheTTL == 0 {
		return 2 * time.Second
	}
	return a.CacheTTL
}

// RecheckInterval returns Recheck or its default.
func (a *Authenticator) RecheckInterval() time.Duration {
	if a.Recheck <= 0 {
		return time.Second
	}
	return a.Recheck
}

// cached reports whether the hash was found valid within ttl.
func (a *Authenticator) cached(hash string, ttl time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.valid[hash]
	return ok && time.Since(at) < ttl
}

func (a *Authenticator) remember(hash string) {
	if a.cacheTTL() < 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.valid == nil || len(a.valid) > 10_000 {
		a.valid = map[string]time.Time{}
	}
	a.valid[hash] = time.Now()
}

// MachineTokenStore is what an [Authenticator] reads to recognise machine
// tokens.
type MachineTokenStore interface {
	MachineByHash(ctx context.Context, hash string) (store.Machine, error)
}

// Principal is who a request acts for: an API key (what its Role allows,
// in its workspace or, for an admin, any), an environment key (that
// environment's work queue and the tool work of its sessions only, in the
// environment's workspace), a sessions token (one session's work, in the
// session's workspace) or a machine token (nothing on this API).
type Principal struct {
	// KeyID is the API key's id ("" for the bootstrap key and the other
	// kinds of credential).
	KeyID string
	// Role is an API key's role (store.RoleAdmin for the bootstrap key
	// and keys made before roles existed); "" for the other kinds.
	Role string
	// KeyWorkspace is the workspace a developer or read-only key is bound
	// to ("" for an admin).
	KeyWorkspace string
	// Workspace is the workspace the request works in: for an API key set
	// by the server once the anthropic-workspace-id header is checked, for
	// an environment key its environment's.
	Workspace string
	// EnvironmentID and EnvironmentKeyID are set for an environment key:
	// its environment and its id.
	EnvironmentID    string
	EnvironmentKeyID string
	// MachineID is set for a machine token.
	MachineID string
	// Grant is set for a sessions token: the session and work item it
	// works for.
	Grant *SessionGrant
	// hash is the hash of the key the request presented ("" for the
	// bootstrap key, which cannot be revoked).
	hash string
}

// RecheckPrincipal checks again the key p was authenticated with: an error
// once it was revoked, or its environment archived or deleted (for a
// sessions token: its session archived or deleted). A key found
// valid within [Authenticator.RecheckInterval] is not read again, so the
// streams of one key share one check per interval.
func (a *Authenticator) RecheckPrincipal(ctx context.Context, p Principal) error {
	switch {
	case p.hash == "":
		return nil
	case p.EnvironmentID != "":
		// Remembered apart from API keys: an environment key is never
		// taken for an API key.
		if a.cached("ek:"+p.hash, a.RecheckInterval()) {
			return nil
		}
		if _, err := a.checkEnvironmentKey(ctx, p.hash); err != nil {
			return err
		}
		a.remember("ek:" + p.hash)
		return nil
	case p.Grant != nil:
		if a.cached("st:"+p.hash, a.RecheckInterval()) {
			return nil
		}
		if _, err := a.checkSessionsToken(ctx, p.hash); err != nil {
			return err
		}
		a.remember("st:" + p.hash)
		return nil
	case a.cached(p.hash, a.RecheckInterval()):
		return nil
	}
	_, err := a.checkAPIKey(ctx, p.hash)
	return err
}

// Check authenticates r.
func (a *Authenticator) Check(ctx context.Context, r *http.Request) (Principal, error) {
	key := r.Header.Get("x-api-key")
	if key == "" {
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = strings.TrimSpace(v)
		}
	}
	if key == "" {
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "missing API key: send it as the x-api-key header or as Authorization: Bearer")
	}
	if strings.HasPrefix(key, secret.EnvironmentKeyPrefix) && a.EnvironmentKeys != nil {
		return a.checkEnvironmentKey(ctx, secret.Hash(key))
	}
	if strings.HasPrefix(key, secret.SessionsTokenPrefix) && a.SessionTokens != nil {
		return a.checkSessionsToken(ctx, secret.Hash(key))
	}
	if strings.HasPrefix(key, secret.MachineTokenPrefix) && a.Machines != nil {
		return a.checkMachineToken(ctx, secret.Hash(key))
	}
	if a.Bootstrap != "" && subtle.ConstantTimeCompare([]byte(key), []byte(a.Bootstrap)) == 1 {
		return Principal{Role: store.RoleAdmin}, nil
	}
	hash := HashKey(key)
	if p, ok := a.cachedKey(hash); ok {
		return p, nil
	}
	return a.checkAPIKey(ctx, hash)
}

// cachedKey returns the principal of the API key with that hash if it was
// found valid within the cache's time.
func (a *Authenticator) cachedKey(hash string) (Principal, bool) {
	if !a.cached(hash, a.cacheTTL()) {
		return Principal{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.keys[hash]
	return p, ok
}

// keyPrincipal is the principal of an API key: keys made before roles
// existed are admins.
func keyPrincipal(k store.APIKey, hash string) Principal {
	p := Principal{KeyID: k.ID, Role: k.Role, KeyWorkspace: k.WorkspaceID, hash: hash}
	if p.Role == "" {
		p.Role = store.RoleAdmin
	}
	return p
}

// checkAPIKey reads the API key whose hash is hash: it must be known,
// active and not revoked (an inactive or archived key is refused like a
// revoked one).
func (a *Authenticator) checkAPIKey(ctx context.Context, hash string) (Principal, error) {
	k, err := a.Keys.APIKeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (k.RevokedAt != nil || k.Status == store.KeyArchived)) {
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "invalid or revoked API key")
	}
	if err == nil && k.Status != "" && k.Status != store.KeyActive {
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "API key %s is %s: an admin can make it active again", k.ID, k.Status)
	}
	if err != nil {
		return Principal{}, err
	}
	p := keyPrincipal(k, hash)
	a.mu.Lock()
	if a.keys == nil || len(a.keys) > 10_000 {
		a.keys = map[string]Principal{}
	}
	a.keys[hash] = p
	a.mu.Unlock()
	a.remember(hash)
	return p, nil
}

// checkEnvironmentKey authenticates an environment key by its hash: it
// must be known, not revoked, and belong to an environment that is not
// archived and that outside workers may serve (a key of a cloud
// environment, made before they were refused, is rejected).
func (a *Authenticator) checkEnvironmentKey(ctx context.Context, hash string) (Principal, error) {
	invalid := errf(http.StatusUnauthorized, ma.ErrAuthentication, "invalid or revoked environment key")
	k, err := a.EnvironmentKeys.EnvironmentKeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.RevokedAt != nil) {
		return Principal{}, invalid
	}
	if err != nil {
		return Principal{}, err
	}
	env, err := a.EnvironmentKeys.GetEnvironment(ctx, k.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, invalid
	}
	if err != nil {
		return Principal{}, err
	}
	if env.ArchivedAt != nil {
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "environment key %s rejected: environment %s is archived", k.ID, env.ID)
	}
	if err := env.CheckOutsideExecutors(); err != nil {
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "environment key %s rejected: %v", k.ID, err)
	}
	// The key works in its environment's workspace: the store scopes its
	// requests there, as an API key's.
	return Principal{EnvironmentID: k.EnvironmentID, EnvironmentKeyID: k.ID, Workspace: k.WorkspaceID, hash: hash}, nil
}

// checkMachineToken authenticates a machine token by its hash: it must be
// known and not revoked.
func (a *Authenticator) checkMachineToken(ctx context.Context, hash string) (Principal, error) {
	m, err := a.Machines.MachineByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) || (err == nil && m.RevokedAt != nil) {
		return Principal{}, errf(http.StatusUnauthorized, ma.ErrAuthentication, "invalid or revoked machine token")
	}
	if err != nil {
		return Principal{}, err
	}
	return Principal{MachineID: m.ID, hash: hash}, nil
}
