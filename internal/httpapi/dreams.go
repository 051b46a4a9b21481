package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// dreamsBeta is the beta header of the dreams endpoints.
const dreamsBeta = "dreaming-2026-04-21"

// Limits of a dream.
const (
	maxDreamSessions     = 100
	maxDreamInstructions = 4096
	maxDreamModelID      = 256
)

// DreamRunner runs the dreams the API creates; *dreams.Runner is one.
type DreamRunner interface {
	// Wake tells the runner a dream was created.
	Wake()
}

// dreamRows is what the dreams endpoints need of the store.
type dreamRows interface {
	CreateDream(ctx context.Context, d store.Dream) error
	GetDream(ctx context.Context, id string) (store.Dream, error)
	UpdateDream(ctx context.Context, id string, fn func(cur *store.Dream) error) (store.Dream, error)
	ListDreams(ctx context.Context, q store.DreamQuery) ([]store.Item[ma.Dream], error)
	GetMemoryStore(ctx context.Context, id string) (ma.MemoryStore, error)
	GetSession(ctx context.Context, id string) (ma.Session, error)
}

// dreamAPI serves /v1/dreams.
type dreamAPI struct {
	s      *Server
	st     dreamRows
	runner DreamRunner
}

// dreamRoutes registers the five dreams endpoints.
func (s *Server) dreamRoutes() {
	d := &dreamAPI{s: s, st: s.cfg.Store, runner: s.cfg.Dreams}
	for pattern, h := range map[string]handlerFunc{
		"POST /v1/dreams":              d.create,
		"GET /v1/dreams":               d.list,
		"GET /v1/dreams/{id}":          d.get,
		"POST /v1/dreams/{id}/archive": noBody(d.archive),
		"POST /v1/dreams/{id}/cancel":  noBody(d.cancel),
	} {
		s.handle(pattern, smallBody, dreamHeaders(h))
	}
}

// dreamHeaders refuses a dreams request without the dreams beta header.
func dreamHeaders(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		for _, v := range r.Header.Values("anthropic-beta") {
			for _, b := range strings.Split(v, ",") {
				if strings.TrimSpace(b) == dreamsBeta {
					return h(w, r)
				}
			}
		}
		return badRequest("anthropic-beta: the dreams endpoints are in beta; send the header anthropic-beta: %s", dreamsBeta)
	}
}

// dreamInputParam is an entry of a dream's inputs: a memory_store or a
// sessions input.
type dreamInputParam struct {
	Type          string   `json:"type"`
	MemoryStoreID *string  `json:"memory_store_id"`
	SessionIDs    []string `json:"session_ids"`
}

// dreamModelParam is a dream's model: an id or {id, speed}.
type dreamModelParam struct {
	ma.DreamModel
}

func (m *dreamModelParam) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &m.ID)
	}
	var obj struct {
		ID    string `json:"id"`
		Speed string `json:"speed"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return badRequest("model: must be a model id string or an object {id, speed?}")
	}
	if err := checkUnknownAt("model", b, &obj); err != nil {
		return err
	}
	m.ID, m.Speed = obj.ID, obj.Speed
	return nil
}

// dreamOutputParam is a dream's output_behavior.
type dreamOutputParam struct {
	Type          string  `json:"type"`
	MemoryStoreID *string `json:"memory_store_id"`
}

type dreamCreate struct {
	Inputs         []dreamInputParam `json:"inputs"`
	Model          *dreamModelParam  `json:"model"`
	Instructions   *string           `json:"instructions"`
	OutputBehavior *dreamOutputParam `json:"output_behavior"`
}

// create creates a pending dream and wakes the runner.
func (a *dreamAPI) create(w http.ResponseWriter, r *http.Request) error {
	if a.runner == nil {
		return badRequest("this server does not run dreams")
	}
	var p dreamCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	d, err := a.newDream(r, &p)
	if err != nil {
		return err
	}
	ctx := withAudit(r, "dream.created", "dream", d.ID, requestWorkspace(r), map[string]string{"memory_store_id": d.MemoryStoreInput()})
	err = a.st.CreateDream(ctx, d)
	var dc *store.DreamConflictError
	if errors.As(err, &dc) {
		e := errf(http.StatusConflict, ma.ErrConflict, "output_behavior: %s", dc.Error())
		e.noRetry = true
		return e
	}
	if err != nil {
		return err
	}
	a.runner.Wake()
	writeJSON(w, d.Dream)
	return nil
}

// newDream checks a create request and returns the dream it asks for.
func (a *dreamAPI) newDream(r *http.Request, p *dreamCreate) (store.Dream, error) {
	d := store.Dream{Dream: ma.Dream{ID: ids.New(ids.Dream), Type: "dream", Status: ma.DreamPending, Outputs: []ma.DreamOutput{}},
		Active: true, Plan: store.DreamPlan{SessionID: ids.New(ids.Session), APIKeyID: principal(r).KeyID}}
	var err error
	if d.Inputs, err = a.inputs(r.Context(), p.Inputs); err != nil {
		return d, err
	}
	if d.Model, err = a.model(p.Model); err != nil {
		return d, err
	}
	if p.Instructions != nil {
		if err := checkLen("instructions", *p.Instructions, 1, maxDreamInstructions); err != nil {
			return d, err
		}
		d.Instructions = p.Instructions
	}
	if d.OutputBehavior, err = outputBehavior(p.OutputBehavior, d.MemoryStoreInput()); err != nil {
		return d, err
	}
	if d.OutputBehavior.Type == ma.DreamCreateNew {
		d.Plan.StoreID = ids.New(ids.MemoryStore)
	}
	// Microseconds, as the SDKs send created_at[gt] and [lt]: a bound
	// taken from a dream's created_at then excludes that very dream.
	d.CreatedAt = ma.Time(time.Now().Truncate(time.Microsecond))
	return d, nil
}

// inputs checks a dream's inputs: exactly one memory_store input, whose
// store exists in the workspace and is not archived, and exactly one
// sessions input of 1 to 100 distinct sessions of the workspace (listed
// sorted).
func (a *dreamAPI) inputs(ctx context.Context, params []dreamInputParam) ([]ma.DreamInput, error) {
	var out []ma.DreamInput
	var stores, sessions int
	for i, in := range params {
		f := fmt.Sprintf("inputs[%d]", i)
		var err error
		var di ma.DreamInput
		switch in.Type {
		case ma.DreamInputMemoryStore:
			stores++
			di, err = a.storeInput(ctx, f, in)
		case ma.DreamInputSessions:
			sessions++
			di, err = a.sessionsInput(ctx, f, in)
		case "":
			err = badRequest("%s.type: required", f)
		default:
			err = unknownValue(f+".type", "input type", in.Type, []string{ma.DreamInputMemoryStore, ma.DreamInputSessions})
		}
		if err != nil {
			return nil, err
		}
		out = append(out, di)
	}
	if stores != 1 || sessions != 1 {
		return nil, badRequest("inputs: must hold exactly one memory_store input and exactly one sessions input; got %d and %d", stores, sessions)
	}
	return out, nil
}

// storeInput checks a memory_store input.
func (a *dreamAPI) storeInput(ctx context.Context, f string, in dreamInputParam) (ma.DreamInput, error) {
	if in.SessionIDs != nil {
		return ma.DreamInput{}, badRequest("%s: only type and memory_store_id are fields of a memory_store input", f)
	}
	if in.MemoryStoreID == nil || *in.MemoryStoreID == "" {
		return ma.DreamInput{}, badRequest("%s.memory_store_id: required", f)
	}
	ms, err := a.st.GetMemoryStore(ctx, *in.MemoryStoreID)
	if errors.Is(err, store.ErrNotFound) {
		return ma.DreamInput{}, notFound("%s.memory_store_id: memory store %s not found", f, *in.MemoryStoreID)
	}
	if err != nil {
		return ma.DreamInput{}, err
	}
	if ms.ArchivedAt != nil {
		return ma.DreamInput{}, badRequest("%s.memory_store_id: memory store %s is archived; a dream cannot read it", f, ms.ID)
	}
	return ma.DreamInput{Type: ma.DreamInputMemoryStore, MemoryStoreID: ms.ID}, nil
}

// sessionsInput checks a sessions input.
func (a *dreamAPI) sessionsInput(ctx context.Context, f string, in dreamInputParam) (ma.DreamInput, error) {
	if in.MemoryStoreID != nil {
		return ma.DreamInput{}, badRequest("%s: only type and session_ids are fields of a sessions input", f)
	}
	if n := len(in.SessionIDs); n < 1 || n > maxDreamSessions {
		return ma.DreamInput{}, badRequest("%s.session_ids: must hold 1 to %d session ids, got %d", f, maxDreamSessions, n)
	}
	seen := map[string]bool{}
	for j, id := range in.SessionIDs {
		if seen[id] {
			return ma.DreamInput{}, badRequest("%s.session_ids[%d]: session %s is listed twice", f, j, id)
		}
		seen[id] = true
		if _, err := a.st.GetSession(ctx, id); errors.Is(err, store.ErrNotFound) {
			return ma.DreamInput{}, notFound("%s.session_ids[%d]: session %q not found", f, j, id)
		} else if err != nil {
			return ma.DreamInput{}, err
		}
	}
	sorted := slices.Clone(in.SessionIDs)
	slices.Sort(sorted)
	return ma.DreamInput{Type: ma.DreamInputSessions, SessionIDs: sorted}, nil
}

// model checks a dream's model: an id a provider serves, at the
// standard speed (the only one dreams take).
func (a *dreamAPI) model(p *dreamModelParam) (ma.DreamModel, error) {
	if p == nil {
		return ma.DreamModel{}, badRequest("model: required")
	}
	if err := checkLen("model.id", p.ID, 1, maxDreamModelID); err != nil {
		return ma.DreamModel{}, err
	}
	switch p.Speed {
	case "", "standard":
	default:
		return ma.DreamModel{}, badRequest("model.speed: dreams run at the standard speed only; got %q", p.Speed)
	}
	if err := a.s.checkModel("model.id", p.ID); err != nil {
		return ma.DreamModel{}, err
	}
	return ma.DreamModel{ID: p.ID, Speed: "standard"}, nil
}

// outputBehavior checks a dream's output_behavior (create_new when
// absent); update_existing names the input store.
func outputBehavior(p *dreamOutputParam, input string) (ma.DreamOutputBehavior, error) {
	if p == nil {
		return ma.DreamOutputBehavior{Type: ma.DreamCreateNew}, nil
	}
	switch p.Type {
	case ma.DreamCreateNew:
		if p.MemoryStoreID != nil {
			return ma.DreamOutputBehavior{}, badRequest("output_behavior.memory_store_id: a create_new dream writes a new memory store; memory_store_id is for update_existing")
		}
		return ma.DreamOutputBehavior{Type: ma.DreamCreateNew}, nil
	case ma.DreamUpdateExisting:
		if p.MemoryStoreID == nil || *p.MemoryStoreID == "" {
			return ma.DreamOutputBehavior{}, badRequest("output_behavior.memory_store_id: required for update_existing")
		}
		if *p.MemoryStoreID != input {
			return ma.DreamOutputBehavior{}, badRequest("output_behavior.memory_store_id: must be the memory store of the memory_store input (%s); got %s", input, *p.MemoryStoreID)
		}
		return ma.DreamOutputBehavior{Type: ma.DreamUpdateExisting, MemoryStoreID: input}, nil
	case "":
		return ma.DreamOutputBehavior{}, badRequest("output_behavior.type: required")
	}
	return ma.DreamOutputBehavior{}, unknownValue("output_behavior.type", "output behavior", p.Type, []string{ma.DreamCreateNew, ma.DreamUpdateExisting})
}

func (a *dreamAPI) get(w http.ResponseWriter, r *http.Request) error {
	d, err := a.st.GetDream(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, d.Dream)
	return nil
}

// dreamListParams are the query parameters of GET /v1/dreams ("beta" is
// the one some SDKs add to every beta request).
var dreamListParams = []string{"beta", "created_at[gt]", "created_at[lt]", "include_archived", "limit", "page", "statuses", "statuses[]"}

// list lists the workspace's dreams, newest first.
func (a *dreamAPI) list(w http.ResponseWriter, r *http.Request) error {
	for k := range r.URL.Query() {
		if !slices.Contains(dreamListParams, k) {
			return badRequest("%s: unknown query parameter; accepted: %s", k, strings.Join(dreamListParams[1:], ", "))
		}
	}
	q := query{r}
	dq := store.DreamQuery{ListQuery: store.ListQuery{Desc: true}}
	var err error
	if dq.Limit, err = q.limit(20, 100); err != nil {
		return err
	}
	if dq.IncludeArchived, err = q.boolean("include_archived"); err != nil {
		return err
	}
	if dq.CreatedGT, err = q.time("created_at[gt]"); err != nil {
		return err
	}
	if dq.CreatedLT, err = q.time("created_at[lt]"); err != nil {
		return err
	}
	if dq.Statuses, err = q.enums("statuses", "status", ma.DreamStatuses); err != nil {
		return err
	}
	if page := q.str("page"); page != "" {
		c, err := decodeCursor(page, "desc")
		if err != nil {
			return err
		}
		dq.After = c.Pos
	}
	items, err := a.st.ListDreams(r.Context(), dq)
	if err != nil {
		return err
	}
	writePage(w, items, dq.ListQuery, "desc")
	return nil
}

// archive archives an ended dream; archiving an archived dream returns it
// unchanged.
func (a *dreamAPI) archive(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ctx := withAudit(r, "dream.archived", "dream", id, requestWorkspace(r), nil)
	d, err := a.st.UpdateDream(ctx, id, func(d *store.Dream) error {
		switch {
		case d.ArchivedAt != nil:
		case !d.Ended():
			return badRequest("dream %s is %s: only a completed, failed or canceled dream can be archived; cancel it first", d.ID, d.Status)
		default:
			now := ma.Time(time.Now())
			d.ArchivedAt = &now
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, d.Dream)
	return nil
}

// cancel cancels a pending or running dream and interrupts its session;
// canceling a canceled dream returns it unchanged.
func (a *dreamAPI) cancel(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ctx := withAudit(r, "dream.canceled", "dream", id, requestWorkspace(r), nil)
	d, err := a.st.UpdateDream(ctx, id, func(d *store.Dream) error {
		switch d.Status {
		case ma.DreamPending, ma.DreamRunning:
			now := ma.Time(time.Now())
			d.Status, d.EndedAt = ma.DreamCanceled, &now
		case ma.DreamCompleted, ma.DreamFailed:
			return badRequest("dream %s is %s: only a pending or running dream can be canceled", d.ID, d.Status)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if d.Active && d.SessionID != nil {
		// The runner interrupts it too; this spares the wait.
		interrupt := []ma.Event{{Type: ma.EventUserInterrupt}}
		if _, err := a.s.cfg.Sessions.Send(r.Context(), *d.SessionID, interrupt, nil); err != nil {
			a.s.log.Warn("dreams: cannot interrupt a canceled dream's session", "dream", d.ID, "session", *d.SessionID, "err", err)
		}
	}
	writeJSON(w, d.Dream)
	return nil
}
