package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/secret"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// environmentKeyStore is what the environment key endpoints keep in the
// database (the store is one).
type environmentKeyStore interface {
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
	CreateEnvironmentKey(ctx context.Context, k store.EnvironmentKey) error
	ListEnvironmentKeys(ctx context.Context, environmentID string) ([]store.EnvironmentKey, error)
	// RevokeEnvironmentKey revokes a key of the environment and returns
	// it.
	RevokeEnvironmentKey(ctx context.Context, environmentID, id string, at time.Time) (store.EnvironmentKey, error)
}

// keyRevocations is told when an environment key is revoked (Lifecycle
// is one).
type keyRevocations interface {
	EnvironmentKeyRevoked(ctx context.Context, k store.EnvironmentKey)
}

// environmentKeyAPI serves the keys of self-hosted environments.
type environmentKeyAPI struct {
	st environmentKeyStore
	// revoked, if not nil, is told when a key is revoked.
	revoked keyRevocations
}

// environmentKeyRoutes registers the environment key endpoints.
func (s *Server) environmentKeyRoutes() {
	k := &environmentKeyAPI{st: s.cfg.Store, revoked: s.cfg.Lifecycle}
	s.handle("POST /v1/environments/{id}/keys", smallBody, noBody(k.createEnvironmentKey))
	s.handle("GET /v1/environments/{id}/keys", smallBody, k.listEnvironmentKeys)
	s.handle("POST /v1/environments/{id}/keys/{key_id}/revoke", smallBody, noBody(k.revokeEnvironmentKey))
}

// environmentKey is an environment key as listed (never the secret).
type environmentKey struct {
	Type          string  `json:"type"`
	ID            string  `json:"id"`
	EnvironmentID string  `json:"environment_id"`
	Hint          string  `json:"hint"`
	CreatedAt     string  `json:"created_at"`
	RevokedAt     *string `json:"revoked_at"`
}

func keyView(k store.EnvironmentKey) environmentKey {
	return environmentKey{Type: "environment_key", ID: k.ID, EnvironmentID: k.EnvironmentID, Hint: k.Hint,
		CreatedAt: ma.Time(k.CreatedAt), RevokedAt: ma.TimePtr(k.RevokedAt)}
}

// createEnvironmentKey mints a key for a self-hosted environment's
// executors and workers; the key is in this response only. A cloud
// environment has no keys: 400.
func (ek *environmentKeyAPI) createEnvironmentKey(w http.ResponseWriter, r *http.Request) error {
	env, err := ek.st.GetEnvironment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := env.CheckOutsideExecutors(); err != nil {
		return badRequest("%v", err)
	}
	if env.ArchivedAt != nil {
		return conflict("environment %s is archived; it takes no new keys", env.ID)
	}
	key, hash := secret.New(secret.EnvironmentKeyPrefix)
	k := store.EnvironmentKey{ID: ids.New("ekey_"), EnvironmentID: env.ID, Hash: hash, Hint: key[len(key)-4:], CreatedAt: time.Now().UTC()}
	if err := ek.st.CreateEnvironmentKey(r.Context(), k); err != nil {
		return err
	}
	writeJSON(w, struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Key       string `json:"key"`
		CreatedAt string `json:"created_at"`
	}{"environment_key", k.ID, key, ma.Time(k.CreatedAt)})
	return nil
}

func (ek *environmentKeyAPI) listEnvironmentKeys(w http.ResponseWriter, r *http.Request) error {
	env, err := ek.st.GetEnvironment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	keys, err := ek.st.ListEnvironmentKeys(r.Context(), env.ID)
	if err != nil {
		return err
	}
	page := ma.Page[environmentKey]{Data: make([]environmentKey, len(keys))}
	for i, k := range keys {
		page.Data[i] = keyView(k)
	}
	writeJSON(w, page)
	return nil
}

// revokeEnvironmentKey revokes a key: requests with it are refused from
// now on, and the executors and streams it opened are cut off.
func (ek *environmentKeyAPI) revokeEnvironmentKey(w http.ResponseWriter, r *http.Request) error {
	k, err := ek.st.RevokeEnvironmentKey(r.Context(), r.PathValue("id"), r.PathValue("key_id"), time.Now())
	if err != nil {
		return err
	}
	if ek.revoked != nil {
		ek.revoked.EnvironmentKeyRevoked(r.Context(), k)
	}
	writeJSON(w, keyView(k))
	return nil
}
