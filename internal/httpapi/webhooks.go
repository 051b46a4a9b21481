package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/webhooks"
	ma "github.com/reinsdev/reins/managedagents"
)

// WebhookConfig configures the webhook endpoints API
// (/v1/organizations/webhooks, in the shape of the SDK's organization
// webhooks; a reins extension takes every Managed Agents event type).
type WebhookConfig struct {
	// Store holds the endpoints; nil means Config.Store, which must then
	// implement store.Webhooks.
	Store store.Webhooks
	// AllowHTTP permits http:// endpoint URLs; otherwise only https://.
	AllowHTTP bool
}

// Sealer seals signing secrets under the master key; *vault.Keyring is
// one.
type Sealer interface {
	Seal(plaintext []byte, ad string) ([]byte, error)
}

// maxWebhookEndpoints bounds a workspace's endpoints.
const maxWebhookEndpoints = 100

// webhookAPI serves the webhook endpoints.
type webhookAPI struct {
	st        store.Webhooks
	keys      Sealer
	allowHTTP bool
}

// webhookRoutes registers the webhook endpoints API. Developer keys may
// manage their workspace's endpoints (see adminPath); read_only keys
// read them.
func (s *Server) webhookRoutes(cfg WebhookConfig, keys Sealer) {
	st := cfg.Store
	if st == nil {
		w, ok := any(s.cfg.Store).(store.Webhooks)
		if !ok {
			return
		}
		st = w
	}
	a := &webhookAPI{st: st, keys: keys, allowHTTP: cfg.AllowHTTP}
	s.handle("POST /v1/organizations/webhooks", smallBody, a.create)
	s.handle("GET /v1/organizations/webhooks", smallBody, a.list)
	s.handle("GET /v1/organizations/webhooks/{id}", smallBody, a.get)
	s.handle("POST /v1/organizations/webhooks/{id}", smallBody, a.update)
	s.handle("DELETE /v1/organizations/webhooks/{id}", smallBody, noBody(a.delete))
	s.handle("POST /v1/organizations/webhooks/{id}/regenerate_signing_secret", smallBody, noBody(a.rotate))
}

// webhookView is an endpoint as the API shows it; SigningSecret only in
// the answer of its creation.
type webhookView struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	Name           string   `json:"name"`
	Description    string   `json:"description"`
	EnabledEvents  []string `json:"enabled_events"`
	State          string   `json:"state"`
	DisabledReason string   `json:"disabled_reason"`
	CreatedAt      string   `json:"created_at"`
	UpdatedAt      string   `json:"updated_at"`
	SigningSecret  string   `json:"signing_secret,omitempty"`
}

func webhookOut(e store.WebhookEndpoint) webhookView {
	return webhookView{ID: e.ID, URL: e.URL, Name: e.Name, Description: e.Description, EnabledEvents: e.EnabledEvents,
		State: e.State, DisabledReason: e.DisabledReason, CreatedAt: rfc3339(e.CreatedAt), UpdatedAt: rfc3339(e.UpdatedAt)}
}

type webhookCreate struct {
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
}

type webhookUpdate struct {
	URL           *string  `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Name          *string  `json:"name"`
	Description   *string  `json:"description"`
	State         *string  `json:"state"`
}

// checkURL refuses a URL that is not absolute https (or http, when the
// operator allows it).
func (a *webhookAPI) checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil {
		return badRequest("url: must be an absolute https URL without credentials, got %q", s)
	}
	if u.Scheme == "http" && !a.allowHTTP {
		return badRequest("url: must be https (an operator can allow http with --webhook-allow-http), got %q", s)
	}
	if len(s) > 2048 {
		return badRequest("url: at most 2048 characters")
	}
	return nil
}

// checkEvents validates an enabled_events list.
func checkEvents(events []string) error {
	if err := webhooks.CheckEventTypes(events); err != nil {
		return badRequest("enabled_events: %v", err)
	}
	return nil
}

func (a *webhookAPI) create(w http.ResponseWriter, r *http.Request) error {
	var p webhookCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if err := a.checkURL(p.URL); err != nil {
		return err
	}
	if len(p.EnabledEvents) == 0 {
		return badRequest("enabled_events: give at least one event type")
	}
	if err := checkEvents(p.EnabledEvents); err != nil {
		return err
	}
	if n, err := a.st.ListWebhookEndpoints(r.Context()); err != nil {
		return err
	} else if len(n) >= maxWebhookEndpoints {
		return badRequest("this workspace has %d webhook endpoints, the most it may have", maxWebhookEndpoints)
	}
	now := time.Now().UTC()
	e := store.WebhookEndpoint{ID: ids.New(ids.WebhookEndpoint), URL: p.URL, Name: p.Name, Description: p.Description,
		EnabledEvents: dedupe(p.EnabledEvents), State: store.WebhookEnabled, CreatedAt: now, UpdatedAt: now}
	secret := webhooks.NewSecret()
	sealed, err := a.keys.Seal([]byte(secret), e.ID)
	if err != nil {
		return err
	}
	e.SealedSecret = sealed
	ctx := withAudit(r, "webhook_endpoint.created", "webhook_endpoint", e.ID, requestWorkspace(r), map[string]any{"url": e.URL, "enabled_events": e.EnabledEvents})
	if err := a.st.CreateWebhookEndpoint(ctx, e); err != nil {
		return err
	}
	out := webhookOut(e)
	out.SigningSecret = secret
	writeJSON(w, out)
	return nil
}

// dedupe returns the distinct strings of s, in their first order.
func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func (a *webhookAPI) get(w http.ResponseWriter, r *http.Request) error {
	e, err := a.st.GetWebhookEndpoint(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, webhookOut(e))
	return nil
}

func (a *webhookAPI) update(w http.ResponseWriter, r *http.Request) error {
	var p webhookUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	if p.URL != nil {
		if err := a.checkURL(*p.URL); err != nil {
			return err
		}
	}
	if err := checkEvents(p.EnabledEvents); err != nil {
		return err
	}
	if p.State != nil && *p.State != store.WebhookEnabled && *p.State != store.WebhookDisabled {
		return badRequest("state: must be enabled or disabled, got %q", *p.State)
	}
	id := r.PathValue("id")
	ctx := withAudit(r, "webhook_endpoint.updated", "webhook_endpoint", id, requestWorkspace(r), nil)
	e, err := a.st.UpdateWebhookEndpoint(ctx, id, func(e *store.WebhookEndpoint) error {
		p.apply(e)
		e.UpdatedAt = time.Now().UTC()
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, webhookOut(e))
	return nil
}

// apply sets the fields p gives; an empty enabled_events leaves them, and
// enabling clears disabled_reason.
func (p webhookUpdate) apply(e *store.WebhookEndpoint) {
	if p.URL != nil {
		e.URL = *p.URL
	}
	if p.Name != nil {
		e.Name = *p.Name
	}
	if p.Description != nil {
		e.Description = *p.Description
	}
	if len(p.EnabledEvents) > 0 {
		e.EnabledEvents = dedupe(p.EnabledEvents)
	}
	if p.State != nil {
		e.State = *p.State
		if e.State == store.WebhookEnabled {
			e.DisabledReason = ""
		}
	}
}

func (a *webhookAPI) list(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	if _, err := q.limit(20, 100); err != nil {
		return err
	}
	order := q.str("order")
	switch order {
	case "", "desc":
		order = "desc"
	case "asc":
	default:
		return badRequest("order: must be asc or desc, got %q", order)
	}
	items, err := a.st.ListWebhookEndpoints(r.Context())
	if err != nil {
		return err
	}
	if order == "desc" {
		slices.Reverse(items)
	}
	page, err := pageByID(r, items, func(e store.WebhookEndpoint) string { return e.ID }, webhookOut)
	if err != nil {
		return err
	}
	writeJSON(w, page)
	return nil
}

func (a *webhookAPI) delete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := a.st.DeleteWebhookEndpoint(withAudit(r, "webhook_endpoint.deleted", "webhook_endpoint", id, requestWorkspace(r), nil), id); err != nil {
		return err
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "webhook_endpoint_deleted"})
	return nil
}

func (a *webhookAPI) rotate(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	secret := webhooks.NewSecret()
	sealed, err := a.keys.Seal([]byte(secret), id)
	if err != nil {
		return err
	}
	ctx := withAudit(r, "webhook_endpoint.secret_regenerated", "webhook_endpoint", id, requestWorkspace(r), nil)
	if _, err := a.st.UpdateWebhookEndpoint(ctx, id, func(e *store.WebhookEndpoint) error {
		e.SealedSecret, e.UpdatedAt = sealed, time.Now().UTC()
		return nil
	}); err != nil {
		return err
	}
	writeJSON(w, map[string]string{"signing_secret": secret})
	return nil
}

// webhookPath reports whether path is of the webhook endpoints API, which
// developer keys may use though it lies under /v1/organizations/.
func webhookPath(path string) bool {
	return path == "/v1/organizations/webhooks" || strings.HasPrefix(path, "/v1/organizations/webhooks/")
}
