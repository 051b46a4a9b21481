package httpapi

import (
	"context"
	"errors"
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
	ws WorkspaceStore
}

// apiKeyRoutes registers the API key endpoints.
func (s *Server) apiKeyRoutes() {
	k := &apiKeyAPI{st: s.cfg.Store, ws: s.cfg.Store}
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
	// Role, WorkspaceID ("" for an admin) and Status: what the key can do.
	Role        string `json:"role"`
	WorkspaceID string `json:"workspace_id"`
	Status      string `json:"status"`
	Key         string `json:"key,omitempty"`
}

func apiKeyView(k store.APIKey) apiKey {
	v := apiKey{Type: "api_key", ID: k.ID, Name: k.Name, Hint: k.Hint, CreatedAt: k.CreatedAt.UTC().Format(time.RFC3339Nano),
		Role: keyRole(k), WorkspaceID: k.WorkspaceID, Status: keyStatus(k)}
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

// createAPIKey serves POST /v1/api_keys {"name", "role"?, "workspace_id"?}:
// a new key, returned in this response only. A developer or read_only key
// needs the workspace_id of an existing workspace; an admin has none.
func (ak *apiKeyAPI) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	var p struct {
		Name        string `json:"name"`
		Role        string `json:"role"`
		WorkspaceID string `json:"workspace_id"`
	}
	if err := decode(r, &p); err != nil {
		return err
	}
	p.Name = strings.TrimSpace(p.Name)
	if p.Name == "" || len(p.Name) > 256 {
		return badRequest("name: required, at most 256 characters")
	}
	if err := ak.checkRole(r.Context(), p.Role, p.WorkspaceID); err != nil {
		return err
	}
	tmpl := store.APIKey{Name: p.Name, Role: p.Role, WorkspaceID: p.WorkspaceID, CreatedByKeyID: principal(r).KeyID}
	key, k, err := ak.create(r, tmpl)
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
	ctx := withAudit(r, "api_key.revoked", "api_key", id, "", nil)
	if k, err := ak.ws.GetAPIKey(r.Context(), id); err == nil {
		ctx = withAudit(r, "api_key.revoked", "api_key", id, k.WorkspaceID, map[string]string{"name": k.Name})
	}
	if err := ak.st.RevokeAPIKey(ctx, id, time.Now().UTC()); err != nil {
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

// checkRole checks a new key's role and workspace.
func (ak *apiKeyAPI) checkRole(ctx context.Context, role, ws string) error {
	switch role {
	case "", store.RoleAdmin:
		if ws != "" {
			return badRequest("workspace_id: an admin key works in every workspace (the %s header picks one); leave it out", WorkspaceHeader)
		}
		return nil
	case store.RoleDeveloper, store.RoleReadOnly:
	default:
		return badRequest("role: must be admin, developer or read_only, got %q", role)
	}
	if ws == "" {
		return badRequest("workspace_id: required for a %s key", role)
	}
	w, err := ak.ws.GetWorkspace(ctx, ws)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("workspace_id: workspace %s not found", ws)
	}
	if err != nil {
		return err
	}
	if w.ArchivedAt != nil {
		return badRequest("workspace_id: workspace %s is archived", ws)
	}
	return nil
}

// create makes the key, its audit entry recorded with it.
func (ak *apiKeyAPI) create(r *http.Request, k store.APIKey) (string, store.APIKey, error) {
	return CreateKeyAs(r.Context(), auditingCreator{ak.st, r}, k)
}

// auditingCreator creates a key with the audit entry naming it.
type auditingCreator struct {
	st KeyCreator
	r  *http.Request
}

func (c auditingCreator) CreateAPIKey(_ context.Context, k store.APIKey) error {
	ctx := withAudit(c.r, "api_key.created", "api_key", k.ID, k.WorkspaceID,
		map[string]string{"name": k.Name, "role": k.Role})
	return c.st.CreateAPIKey(ctx, k)
}
