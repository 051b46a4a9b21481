package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// WorkspaceHeader picks the workspace an admin key works in.
const WorkspaceHeader = "anthropic-workspace-id"

// WorkspaceStore is what the workspace, role and audit rules and the Admin
// API read and change (the store is one).
type WorkspaceStore interface {
	store.Workspaces
	store.KeyAdmin
	store.Audit
	CreateAPIKey(ctx context.Context, k store.APIKey) error
	ListAPIKeys(ctx context.Context) ([]store.APIKey, error)
}

// authorizeKey applies an API key's role to r and sets the workspace the
// request works in (p.Workspace): an admin's is the anthropic-workspace-id
// header's, DefaultWorkspace without it; a developer's or read-only key's
// is its own, and a header naming another is refused.
func (s *Server) authorizeKey(r *http.Request, p *Principal) error {
	hdr := strings.TrimSpace(r.Header.Get(WorkspaceHeader))
	switch {
	case p.Role == store.RoleAdmin && hdr == "":
		p.Workspace = store.DefaultWorkspace
	case p.Role == store.RoleAdmin:
		w, err := s.cfg.Store.GetWorkspace(r.Context(), hdr)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("workspace %s (the %s header) not found", hdr, WorkspaceHeader)
		}
		if err != nil {
			return err
		}
		if w.ArchivedAt != nil {
			return badRequest("%s: workspace %s is archived", WorkspaceHeader, hdr)
		}
		p.Workspace = hdr
	case hdr != "" && hdr != p.KeyWorkspace:
		return errf(http.StatusForbidden, ma.ErrPermission,
			"this key belongs to workspace %s; the %s header asks for workspace %s", p.KeyWorkspace, WorkspaceHeader, hdr)
	default:
		p.Workspace = p.KeyWorkspace
	}
	if p.Role == store.RoleReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
		return errf(http.StatusForbidden, ma.ErrPermission,
			"this key is read_only: it can read its workspace's resources but not %s %s", r.Method, r.URL.Path)
	}
	if p.Role != store.RoleAdmin && adminPath(r.URL.Path) {
		return errf(http.StatusForbidden, ma.ErrPermission,
			"%s needs an admin key; this key's role is %s", r.URL.Path, p.Role)
	}
	return nil
}

// adminPath reports whether path is an admin's only: the Admin API
// (/v1/organizations/) and reins's /v1/api_keys, but for /v1/api_keys/me
// and the webhook endpoints (a workspace's, see webhookRoutes).
func adminPath(path string) bool {
	path = strings.TrimSuffix(path, "/")
	if path == "/v1/api_keys/me" || webhookPath(path) {
		return false
	}
	return strings.HasPrefix(path, "/v1/organizations/") || path == "/v1/api_keys" || strings.HasPrefix(path, "/v1/api_keys/")
}

// withAudit returns r's context carrying the audit entry of the change the
// handler is about to make: the one place the actor and workspace of an
// entry are decided. details holds names and statuses, never a secret.
func withAudit(r *http.Request, action, targetType, targetID, workspaceID string, details any) context.Context {
	p := principal(r)
	e := store.AuditEvent{
		ID: ids.New(ids.AuditEvent), At: time.Now().UTC(), ActorKeyID: p.KeyID,
		Action: action, TargetType: targetType, TargetID: targetID, WorkspaceID: workspaceID,
	}
	if p.KeyID == "" {
		e.Actor = "bootstrap"
	}
	if details != nil {
		e.Details, _ = json.Marshal(details)
	}
	return store.WithAudit(r.Context(), e)
}

// requestWorkspace is the workspace r works in.
func requestWorkspace(r *http.Request) string {
	ws, _ := store.WorkspaceFrom(r.Context())
	return ws
}

// workspaceAPI serves the Admin API: /v1/organizations/workspaces,
// /v1/organizations/api_keys and reins's /v1/organizations/audit_log.
type workspaceAPI struct {
	st WorkspaceStore
}

func (s *Server) workspaceRoutes() {
	a := &workspaceAPI{st: s.cfg.Store}
	s.handle("POST /v1/organizations/workspaces", smallBody, a.createWorkspace)
	s.handle("GET /v1/organizations/workspaces", smallBody, a.listWorkspaces)
	s.handle("GET /v1/organizations/workspaces/{id}", smallBody, a.getWorkspace)
	s.handle("POST /v1/organizations/workspaces/{id}", smallBody, a.updateWorkspace)
	s.handle("POST /v1/organizations/workspaces/{id}/archive", smallBody, noBody(a.archiveWorkspace))
	s.handle("GET /v1/organizations/api_keys", smallBody, a.listKeys)
	s.handle("GET /v1/organizations/api_keys/{id}", smallBody, a.getKey)
	s.handle("POST /v1/organizations/api_keys/{id}", smallBody, a.updateKey)
	s.handle("GET /v1/organizations/audit_log", smallBody, a.listAudit)
	s.handle("GET /v1/api_keys/me", smallBody, a.me)
}

// workspaceView is a Workspace as the Admin API shows it.
type workspaceView struct {
	ID            string            `json:"id"`
	Type          string            `json:"type"`
	Name          string            `json:"name"`
	DisplayColor  string            `json:"display_color"`
	Tags          map[string]string `json:"tags"`
	CreatedAt     string            `json:"created_at"`
	ArchivedAt    *string           `json:"archived_at"`
	DataResidency map[string]any    `json:"data_residency"`
	CompartmentID *string           `json:"compartment_id"`
	ExternalKeyID *string           `json:"external_key_id"`
	UserProfileID *string           `json:"user_profile_id"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func rfc3339Ptr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := rfc3339(*t)
	return &s
}

func workspaceOut(w store.Workspace) workspaceView {
	tags := w.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return workspaceView{
		ID: w.ID, Type: "workspace", Name: w.Name, DisplayColor: w.DisplayColor, Tags: tags,
		CreatedAt: rfc3339(w.CreatedAt), ArchivedAt: rfc3339Ptr(w.ArchivedAt),
		// reins runs where it is installed: no residency to choose.
		DataResidency: map[string]any{"allowed_inference_geos": "unrestricted", "default_inference_geo": "global", "workspace_geo": "us"},
	}
}

// workspaceFields are the writable fields of a workspace; the Admin API's
// others (data_residency, external_key_id, user_profile_id) mean nothing
// here and are refused when set.
type workspaceFields struct {
	Name          *string           `json:"name"`
	DisplayColor  *string           `json:"display_color"`
	Tags          map[string]string `json:"tags"`
	DataResidency json.RawMessage   `json:"data_residency"`
	ExternalKeyID *string           `json:"external_key_id"`
	UserProfileID *string           `json:"user_profile_id"`
}

func (f workspaceFields) apply(w *store.Workspace) error {
	switch {
	case len(f.DataResidency) > 0 && string(f.DataResidency) != "null":
		return badRequest("data_residency: not supported by reins (it runs where it is installed)")
	case f.ExternalKeyID != nil, f.UserProfileID != nil:
		return badRequest("external_key_id, user_profile_id: not supported by reins")
	}
	if f.Name != nil {
		name := strings.TrimSpace(*f.Name)
		if name == "" || len(name) > 40 {
			return badRequest("name: required, 1 to 40 characters")
		}
		w.Name = name
	}
	if f.DisplayColor != nil {
		w.DisplayColor = *f.DisplayColor
	}
	if f.Tags != nil {
		if err := validateMetadata("tags", f.Tags); err != nil {
			return err
		}
		w.Tags = f.Tags
	}
	return nil
}

func (a *workspaceAPI) createWorkspace(w http.ResponseWriter, r *http.Request) error {
	var f workspaceFields
	if err := decode(r, &f); err != nil {
		return err
	}
	if f.Name == nil {
		return badRequest("name: required")
	}
	ws := store.Workspace{ID: ids.New(ids.Workspace), DisplayColor: "#6C5BB9", CreatedAt: time.Now().UTC()}
	if err := f.apply(&ws); err != nil {
		return err
	}
	ctx := withAudit(r, "workspace.created", "workspace", ws.ID, "", map[string]string{"name": ws.Name})
	if err := a.st.CreateWorkspace(ctx, ws); err != nil {
		return err
	}
	writeJSON(w, workspaceOut(ws))
	return nil
}

func (a *workspaceAPI) getWorkspace(w http.ResponseWriter, r *http.Request) error {
	ws, err := a.st.GetWorkspace(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, workspaceOut(ws))
	return nil
}

func (a *workspaceAPI) updateWorkspace(w http.ResponseWriter, r *http.Request) error {
	var f workspaceFields
	if err := decode(r, &f); err != nil {
		return err
	}
	id := r.PathValue("id")
	ctx := withAudit(r, "workspace.updated", "workspace", id, "", f.auditDetails())
	ws, err := a.st.UpdateWorkspace(ctx, id, func(cur *store.Workspace) error {
		if cur.ArchivedAt != nil {
			return conflict("workspace %s is archived", cur.ID)
		}
		return f.apply(cur)
	})
	if err != nil {
		return err
	}
	writeJSON(w, workspaceOut(ws))
	return nil
}

func (f workspaceFields) auditDetails() map[string]any {
	d := map[string]any{}
	if f.Name != nil {
		d["name"] = *f.Name
	}
	if f.DisplayColor != nil {
		d["display_color"] = *f.DisplayColor
	}
	return d
}

func (a *workspaceAPI) archiveWorkspace(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if id == store.DefaultWorkspace {
		return badRequest("workspace %s is the default workspace and cannot be archived", id)
	}
	ctx := withAudit(r, "workspace.archived", "workspace", id, "", nil)
	ws, err := a.st.UpdateWorkspace(ctx, id, func(cur *store.Workspace) error {
		if cur.ArchivedAt == nil {
			now := time.Now().UTC()
			cur.ArchivedAt = &now
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, workspaceOut(ws))
	return nil
}

// adminPage is the Admin API's page: ids as cursors.
type adminPage[T any] struct {
	Data    []T     `json:"data"`
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

// pageByID pages items (in list order) the Admin API's way: after_id,
// before_id (exclusive) and limit (1–1000, default 20).
func pageByID[T, V any](r *http.Request, items []T, id func(T) string, view func(T) V) (adminPage[V], error) {
	q := query{r}
	limit, err := q.limit(20, 1000)
	if err != nil {
		return adminPage[V]{}, err
	}
	after, before := q.str("after_id"), q.str("before_id")
	if after != "" && before != "" {
		return adminPage[V]{}, badRequest("after_id, before_id: give one at most")
	}
	lo, hi := 0, len(items)
	for i, it := range items {
		if after != "" && id(it) == after {
			lo = i + 1
		}
		if before != "" && id(it) == before {
			hi = i
		}
	}
	sel := items[lo:hi]
	page := adminPage[V]{Data: []V{}, HasMore: len(sel) > limit}
	if len(sel) > limit {
		if before != "" {
			sel = sel[len(sel)-limit:]
		} else {
			sel = sel[:limit]
		}
	}
	for _, it := range sel {
		page.Data = append(page.Data, view(it))
	}
	if len(sel) > 0 {
		first, last := id(sel[0]), id(sel[len(sel)-1])
		page.FirstID, page.LastID = &first, &last
	}
	return page, nil
}

func (a *workspaceAPI) listWorkspaces(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	archived, err := q.boolean("include_archived")
	if err != nil {
		return err
	}
	withDefault := true
	if q.str("include_default") != "" {
		if withDefault, err = q.boolean("include_default"); err != nil {
			return err
		}
	}
	items, err := a.st.ListWorkspaces(r.Context(), store.WorkspaceQuery{
		ListQuery: store.ListQuery{IncludeArchived: archived}, IncludeDefault: withDefault, IDs: q.list("ids"),
	})
	if err != nil {
		return err
	}
	page, err := pageByID(r, items, func(it store.Item[store.Workspace]) string { return it.Value.ID },
		func(it store.Item[store.Workspace]) workspaceView { return workspaceOut(it.Value) })
	if err != nil {
		return err
	}
	writeJSON(w, page)
	return nil
}

// orgKeyView is an API key as the Admin API shows it, with reins's role.
type orgKeyView struct {
	ID             string            `json:"id"`
	Type           string            `json:"type"`
	Name           string            `json:"name"`
	Status         string            `json:"status"`
	Role           string            `json:"role"`
	Scope          map[string]string `json:"scope"`
	CreatedAt      string            `json:"created_at"`
	CreatedBy      map[string]string `json:"created_by"`
	ExpiresAt      *string           `json:"expires_at"`
	PartialKeyHint string            `json:"partial_key_hint"`
}

// keyStatus is k's status, for keys made before statuses existed too.
func keyStatus(k store.APIKey) string {
	switch {
	case k.RevokedAt != nil:
		return store.KeyArchived
	case k.Status == "":
		return store.KeyActive
	}
	return k.Status
}

// keyRole is k's role: keys made before roles existed are admins.
func keyRole(k store.APIKey) string {
	if k.Role == "" {
		return store.RoleAdmin
	}
	return k.Role
}

func keyScope(k store.APIKey) map[string]string {
	if k.WorkspaceID == "" {
		return map[string]string{"type": "organization"}
	}
	return map[string]string{"type": "workspace", "workspace_id": k.WorkspaceID}
}

func orgKeyOut(k store.APIKey) orgKeyView {
	by := map[string]string{"type": "api_key", "id": k.CreatedByKeyID}
	if k.CreatedByKeyID == "" {
		by = map[string]string{"type": "reins", "id": "reins"}
	}
	return orgKeyView{
		ID: k.ID, Type: "api_key", Name: k.Name, Status: keyStatus(k), Role: keyRole(k), Scope: keyScope(k),
		CreatedAt: rfc3339(k.CreatedAt), CreatedBy: by, PartialKeyHint: KeyPrefix + "…" + k.Hint,
	}
}

func (a *workspaceAPI) listKeys(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	ws, status := q.str("workspace_id"), q.str("status")
	switch status {
	case "", store.KeyActive, store.KeyInactive, store.KeyArchived:
	default:
		return badRequest("status: must be active, inactive or archived, got %q", status)
	}
	keys, err := a.st.ListAPIKeys(r.Context())
	if err != nil {
		return err
	}
	var kept []store.APIKey
	for _, k := range keys {
		if (ws == "" || k.WorkspaceID == ws) && (status == "" || keyStatus(k) == status) {
			kept = append(kept, k)
		}
	}
	page, err := pageByID(r, kept, func(k store.APIKey) string { return k.ID }, orgKeyOut)
	if err != nil {
		return err
	}
	writeJSON(w, page)
	return nil
}

func (a *workspaceAPI) getKey(w http.ResponseWriter, r *http.Request) error {
	k, err := a.st.GetAPIKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, orgKeyOut(k))
	return nil
}

func (a *workspaceAPI) updateKey(w http.ResponseWriter, r *http.Request) error {
	var p struct {
		Name   *string `json:"name"`
		Status *string `json:"status"`
	}
	if err := decode(r, &p); err != nil {
		return err
	}
	if p.Name != nil {
		if n := strings.TrimSpace(*p.Name); n == "" || len(n) > 256 {
			return badRequest("name: 1 to 256 characters")
		}
	}
	if p.Status != nil {
		switch *p.Status {
		case store.KeyActive, store.KeyInactive, store.KeyArchived:
		default:
			return badRequest("status: must be active, inactive or archived, got %q", *p.Status)
		}
	}
	id := r.PathValue("id")
	details := map[string]string{}
	if p.Name != nil {
		details["name"] = strings.TrimSpace(*p.Name)
	}
	if p.Status != nil {
		details["status"] = *p.Status
	}
	action := "api_key.updated"
	if p.Status != nil && *p.Status == store.KeyArchived {
		action = "api_key.revoked"
	}
	var ws string
	if cur, err := a.st.GetAPIKey(r.Context(), id); err == nil {
		ws = cur.WorkspaceID
	}
	k, err := a.st.UpdateAPIKey(withAudit(r, action, "api_key", id, ws, details), id, func(k *store.APIKey) error {
		if keyStatus(*k) == store.KeyArchived && (p.Status == nil || *p.Status != store.KeyArchived) {
			return badRequest("api key %s is archived (revoked for good)", k.ID)
		}
		if p.Name != nil {
			k.Name = strings.TrimSpace(*p.Name)
		}
		if p.Status != nil {
			k.Status = *p.Status
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, orgKeyOut(k))
	return nil
}

// auditView is an audit log entry as GET /v1/organizations/audit_log shows
// it (a reins extension: the Admin API has no audit log).
type auditView struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	CreatedAt   string            `json:"created_at"`
	Actor       map[string]any    `json:"actor"`
	Action      string            `json:"action"`
	Target      map[string]string `json:"target"`
	WorkspaceID *string           `json:"workspace_id"`
	Details     json.RawMessage   `json:"details"`
}

func auditOut(it store.Item[store.AuditEvent]) auditView {
	e := it.Value
	v := auditView{
		ID: e.ID, Type: "audit_event", CreatedAt: rfc3339(e.At), Action: e.Action,
		Target: map[string]string{"type": e.TargetType, "id": e.TargetID}, Details: e.Details,
	}
	if e.ActorKeyID != "" {
		v.Actor = map[string]any{"type": "api_key", "id": e.ActorKeyID}
	} else {
		v.Actor = map[string]any{"type": e.Actor, "id": nil}
	}
	if e.WorkspaceID != "" {
		v.WorkspaceID = &e.WorkspaceID
	}
	if len(v.Details) == 0 {
		v.Details = json.RawMessage("{}")
	}
	return v
}

// auditWindow bounds the entries the audit log's pages are cut from (the
// newest ones).
const auditWindow = 10_000

func (a *workspaceAPI) listAudit(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	items, err := a.st.ListAudit(r.Context(), store.AuditQuery{
		ListQuery:   store.ListQuery{Desc: true, Limit: auditWindow},
		WorkspaceID: q.str("workspace_id"), Action: q.str("action"),
	})
	if err != nil {
		return err
	}
	page, err := pageByID(r, items, func(it store.Item[store.AuditEvent]) string { return it.Value.ID }, auditOut)
	if err != nil {
		return err
	}
	writeJSON(w, page)
	return nil
}

// me serves GET /v1/api_keys/me: the calling key (any role).
func (a *workspaceAPI) me(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	v := map[string]any{"type": "api_key", "id": nil, "name": "bootstrap (REINS_API_KEY)", "role": p.Role,
		"workspace_id": p.Workspace, "scope": map[string]string{"type": "organization"}}
	if p.KeyID != "" {
		k, err := a.st.GetAPIKey(r.Context(), p.KeyID)
		if err != nil {
			return err
		}
		v["id"], v["name"], v["role"], v["scope"] = k.ID, k.Name, keyRole(k), keyScope(k)
	}
	writeJSON(w, v)
	return nil
}
