package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// apiKeyStore is what the API key endpoints keep in the database
// (the store is one).
type apiKeyStore interface {
	CreateAPIKey(ctx context.Context, k store.APIKey) error
	// ListAPIKeys lists every key, oldest first.
	ListAPIKeys(ctx context.Context) ([]store.APIKey, error)
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
}

// apiKeyAPI serves /v1/api_keys.
type apiKeyAPI struct {
	st apiKeyStore
}

// apiKeyRoutes registers the API key endpoints.
func (s *Server) apiKeyRoutes() {
	k := &apiKeyAPI{st: s.cfg.Store}
	s.handle("GET /v1/api_keys", smallBody, k.listAPIKeys)
	s.handle("POST /v1/api_keys", smallBody, k.createAPIKey)
	s.handle("POST /v1/api_keys/{id}/revoke", smallBody, noBody(k.revokeAPIKey))
}

// apiKey is an API key as /v1/api_keys shows it (a reins extension: the
// console's API keys page; `reins keys` works on the store directly). The
// key itself is in the create response only.
type apiKey struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Hint      string  `json:"hint"`
	CreatedAt string  `json:"created_at"`
	RevokedAt *string `json:"revoked_at"`
	Key       string  `json:"key,omitempty"`
}

func apiKeyView(k store.APIKey) apiKey {
	v := apiKey{Type: "api_key", ID: k.ID, Name: k.Name, Hint: k.Hint, CreatedAt: k.CreatedAt.UTC().Format(time.RFC3339Nano)}
	if k.RevokedAt != nil {
		s := k.RevokedAt.UTC().Format(time.RFC3339Nano)
		v.RevokedAt = &s
	}
	return v
}

// listAPIKeys serves GET /v1/api_keys: every key, oldest first, without
// secrets.
func (ak *apiKeyAPI) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := ak.st.ListAPIKeys(r.Context())
	if err != nil {
		return err
	}
	page := ma.Page[apiKey]{Data: make([]apiKey, len(keys))}
	for i, k := range keys {
		page.Data[i] = apiKeyView(k)
	}
	writeJSON(w, page)
	return nil
}

// createAPIKey serves POST /v1/api_keys {"name"}: a new key, returned in
// this response only.
func (ak *apiKeyAPI) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	var p struct {
		Name string `json:"name"`
	}
	if err := decode(r, &p); err != nil {
		return err
	}
	p.Name = strings.TrimSpace(p.Name)
	if p.Name == "" || len(p.Name) > 256 {
		return badRequest("name: required, at most 256 characters")
	}
	key, k, err := CreateKey(r.Context(), ak.st, p.Name)
	if err != nil {
		return err
	}
	v := apiKeyView(k)
	v.Key = key
	writeJSON(w, v)
	return nil
}

// revokeAPIKey serves POST /v1/api_keys/{id}/revoke. Requests with the key
// are refused from then on (within the authenticator's cache, 2 s), the
// request's own key included.
func (ak *apiKeyAPI) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := ak.st.RevokeAPIKey(r.Context(), id, time.Now().UTC()); err != nil {
		return err
	}
	keys, err := ak.st.ListAPIKeys(r.Context())
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.ID == id {
			writeJSON(w, apiKeyView(k))
			return nil
		}
	}
	return notFound("api key %s not found", id)
}
