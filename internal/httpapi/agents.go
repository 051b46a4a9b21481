package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/reinsdev/reins/internal/agents"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// agentStore is what the agent endpoints read and write of the store.
type agentStore interface {
	CreateAgent(ctx context.Context, a ma.Agent) error
	GetAgent(ctx context.Context, id string, version int64) (ma.Agent, error)
	UpdateAgent(ctx context.Context, id string, fn func(cur ma.Agent) (next ma.Agent, changed bool, err error)) (ma.Agent, error)
	ListAgents(ctx context.Context, q store.ListQuery) ([]store.Item[ma.Agent], error)
	ListAgentVersions(ctx context.Context, id string, q store.ListQuery) ([]store.Item[ma.Agent], error)
}

// agentsAPI serves the agent endpoints: it decodes a request, leaves its
// rules to package agents, stores the result and answers it.
type agentsAPI struct {
	s     *Server // idempotency
	st    agentStore
	rules agents.Rules
}

// agentRoutes registers the agent endpoints.
func (s *Server) agentRoutes() {
	a := &agentsAPI{s: s, st: s.cfg.Store, rules: s.agentRules()}
	s.handle("POST /v1/agents", smallBody*4, a.createAgent)
	s.handle("GET /v1/agents", smallBody, a.listAgents)
	s.handle("GET /v1/agents/{id}", smallBody, a.getAgent)
	s.handle("POST /v1/agents/{id}", smallBody*4, a.updateAgent)
	s.handle("POST /v1/agents/{id}/archive", smallBody, noBody(a.archiveAgent))
	s.handle("GET /v1/agents/{id}/versions", smallBody, a.listAgentVersions)
}

// agentRules are the agent rules over this server's models and skills.
func (s *Server) agentRules() agents.Rules {
	return agents.Rules{Model: s.checkModel, Skills: func(ctx context.Context, field, skillID, version string) (ma.SkillVersion, error) {
		v, err := s.skills.skillVersion(ctx, field, skillID, version, true)
		return v.SkillVersion, err
	}, Agents: s.findAgent}
}

// findAgent is [agents.AgentFinder] over the store: a version of an agent
// of the request's workspace.
func (s *Server) findAgent(ctx context.Context, id string, version int64) (ma.Agent, bool, error) {
	a, err := s.cfg.Store.GetAgent(ctx, id, version)
	if errors.Is(err, store.ErrNotFound) {
		return ma.Agent{}, false, nil
	}
	return a, err == nil, err
}

// agentError answers the rule an agent configuration breaks (an
// *agents.Error) in the API's envelope; other errors are returned as they
// are.
func agentError(err error) error {
	var e *agents.Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Kind == agents.Conflict {
		return conflict("%s", e.Message)
	}
	return badRequest("%s", e.Message)
}

// modelParam is a model given as a bare string or as an object.
type modelParam struct {
	set bool
	ma.ModelConfig
}

func (m *modelParam) UnmarshalJSON(b []byte) error {
	m.set = true
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &m.ID)
	}
	if string(b) == "null" {
		m.set = false
		return nil
	}
	var obj struct {
		ID           string          `json:"id"`
		Effort       json.RawMessage `json:"effort"`
		Speed        string          `json:"speed"`
		InferenceGeo string          `json:"inference_geo"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return badRequest("model: must be a model id string or an object {id, effort?, speed?}")
	}
	if err := checkUnknownAt("model", b, &obj); err != nil {
		return err
	}
	m.ID, m.Speed, m.InferenceGeo = obj.ID, obj.Speed, obj.InferenceGeo
	if len(obj.Effort) > 0 && string(obj.Effort) != "null" {
		var level string
		if json.Unmarshal(obj.Effort, &level) != nil {
			var e ma.Effort
			if json.Unmarshal(obj.Effort, &e) != nil {
				return badRequest("model.effort: must be a level string or {type}")
			}
			level = e.Type
		}
		m.Effort = &ma.Effort{Type: level}
	}
	return nil
}

// validate checks the model ([agents.CheckModel]).
func (m *modelParam) validate() error { return agentError(agents.CheckModel(m.ModelConfig)) }

// The agent configuration as the API takes it; sessions take agent
// overrides of the same shape.
type (
	toolParam  = agents.ToolParam
	skillParam = agents.SkillParam
)

// resolveTools is [agents.ResolveTools] with the API's errors.
func resolveTools(params []toolParam, servers []ma.MCPServer) ([]ma.Tool, error) {
	tools, err := agents.ResolveTools(params, servers)
	return tools, agentError(err)
}

// toolParamsOf is [agents.ToolParams].
func toolParamsOf(tools []ma.Tool) []toolParam { return agents.ToolParams(tools) }

// checkWebTools is [agents.CheckWebTools] with the API's errors.
func checkWebTools(modelID string, tools []ma.Tool) error {
	return agentError(agents.CheckWebTools(modelID, tools))
}

// resolveSkills is [agents.Rules.ResolveSkills] with the API's errors.
func (s *Server) resolveSkills(ctx context.Context, field string, params []skillParam) ([]ma.SkillRef, error) {
	refs, err := s.agentRules().ResolveSkills(ctx, field, params)
	return refs, agentError(err)
}

type agentCreate struct {
	Name        *string         `json:"name"`
	Description string          `json:"description"`
	System      string          `json:"system"`
	Model       modelParam      `json:"model"`
	Tools       []toolParam     `json:"tools"`
	MCPServers  []ma.MCPServer  `json:"mcp_servers"`
	Skills      []skillParam    `json:"skills"`
	Multiagent  json.RawMessage `json:"multiagent"`
	// ExecutionIdentity is accepted when null only.
	ExecutionIdentity json.RawMessage   `json:"execution_identity"`
	Metadata          map[string]string `json:"metadata"`
}

// create is the new agent p describes.
func (p *agentCreate) create() agents.Create {
	return agents.Create{Name: p.Name, Description: p.Description, System: p.System, Model: p.Model.ModelConfig,
		Tools: p.Tools, MCPServers: p.MCPServers, Skills: p.Skills, Multiagent: p.Multiagent, ExecutionIdentity: p.ExecutionIdentity,
		Metadata: func(ma.Metadata) (ma.Metadata, error) {
			if err := validateMetadata("metadata", p.Metadata); err != nil {
				return nil, err
			}
			return ma.Metadata(p.Metadata), nil
		}}
}

// createAgent creates an agent (version 1). Sent with an
// Idempotency-Key, the agent is recorded with its creation, and the
// request repeated with the key answers it as first created.
func (a *agentsAPI) createAgent(w http.ResponseWriter, r *http.Request) error {
	idem, err := a.s.idempotency(r)
	if err != nil {
		return err
	}
	var p agentCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if done, err := a.s.replayOutcome(w, r, idem); done || err != nil {
		return err
	}
	agent, err := a.rules.New(r.Context(), p.create(), time.Now())
	if err != nil {
		return agentError(err)
	}
	return a.s.createKept(w, r, idem, agent, func(ctx context.Context) error { return a.st.CreateAgent(ctx, agent) })
}

func (a *agentsAPI) getAgent(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	v, err := q.int64("version")
	if err != nil {
		return err
	}
	agent, err := a.st.GetAgent(r.Context(), r.PathValue("id"), v)
	if err != nil {
		return err
	}
	writeJSON(w, agent)
	return nil
}

type agentUpdate struct {
	Version     *int64          `json:"version"`
	Name        optString       `json:"name"`
	Description optString       `json:"description"`
	System      optString       `json:"system"`
	Model       modelParam      `json:"model"`
	Tools       *[]toolParam    `json:"tools"`
	MCPServers  *[]ma.MCPServer `json:"mcp_servers"`
	Skills      *[]skillParam   `json:"skills"`
	Multiagent  json.RawMessage `json:"multiagent"`
	// ExecutionIdentity is accepted when null only.
	ExecutionIdentity json.RawMessage `json:"execution_identity"`
	Metadata          metadataPatch   `json:"metadata"`
}

// update is the change p describes; present tells which fields the
// request gave: an explicit null for tools, mcp_servers or skills clears
// them, like [].
func (p *agentUpdate) update(id string, present map[string]json.RawMessage) agents.Update {
	u := agents.Update{ID: id, Version: p.Version, Name: opt(p.Name), Description: opt(p.Description), System: opt(p.System),
		Tools: given(present, "tools", p.Tools), MCPServers: given(present, "mcp_servers", p.MCPServers), Skills: given(present, "skills", p.Skills),
		Multiagent: p.Multiagent, ExecutionIdentity: p.ExecutionIdentity}
	if p.Model.set {
		u.Model = &p.Model.ModelConfig
	}
	if p.Metadata != nil {
		u.Metadata = func(cur ma.Metadata) (ma.Metadata, error) {
			if err := validateMetadataPatch("metadata", cur, p.Metadata); err != nil {
				return nil, err
			}
			return applyMetadata(cur, p.Metadata), nil
		}
	}
	return u
}

// opt is o as an update's field.
func opt(o optString) agents.Opt[string] {
	return agents.Opt[string]{Set: o.Set, Null: o.Null, Value: o.Value}
}

// given is v, a list field of an update, when the request gave it (nil
// for an explicit null); else nil.
func given[T any](present map[string]json.RawMessage, key string, v *[]T) *[]T {
	if _, ok := present[key]; !ok {
		return nil
	}
	var list []T
	if v != nil {
		list = *v
	}
	return &list
}

func (a *agentsAPI) updateAgent(w http.ResponseWriter, r *http.Request) error {
	var p agentUpdate
	present, err := decodePresent(r, &p)
	if err != nil {
		return err
	}
	// The skills are pinned outside the store's transaction.
	change, err := a.rules.Prepare(r.Context(), p.update(r.PathValue("id"), present))
	if err != nil {
		return agentError(err)
	}
	agent, err := a.st.UpdateAgent(r.Context(), r.PathValue("id"), func(cur ma.Agent) (ma.Agent, bool, error) {
		return change.Apply(cur, time.Now())
	})
	if err != nil {
		return agentError(err)
	}
	writeJSON(w, agent)
	return nil
}

func (a *agentsAPI) archiveAgent(w http.ResponseWriter, r *http.Request) error {
	agent, err := a.st.UpdateAgent(r.Context(), r.PathValue("id"), func(cur ma.Agent) (ma.Agent, bool, error) {
		if cur.ArchivedAt != nil {
			return cur, false, nil
		}
		now := ma.Time(time.Now())
		cur.ArchivedAt = &now
		cur.UpdatedAt = now
		return cur, true, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, agent)
	return nil
}

// listQuery reads the common list parameters.
func listQuery(r *http.Request, defaultOrder string) (store.ListQuery, string, error) {
	q := query{r}
	var lq store.ListQuery
	var err error
	if lq.Limit, err = q.limit(20, 100); err != nil {
		return lq, "", err
	}
	if lq.IncludeArchived, err = q.boolean("include_archived"); err != nil {
		return lq, "", err
	}
	if lq.CreatedGTE, err = q.time("created_at[gte]"); err != nil {
		return lq, "", err
	}
	if lq.CreatedLTE, err = q.time("created_at[lte]"); err != nil {
		return lq, "", err
	}
	order, err := q.order(defaultOrder)
	if err != nil {
		return lq, "", err
	}
	lq.Desc = order == "desc"
	if page := q.str("page"); page != "" {
		c, err := decodeCursor(page, order)
		if err != nil {
			return lq, "", err
		}
		if c.Prev {
			lq.Before = c.Pos
		} else {
			lq.After = c.Pos
		}
	}
	return lq, order, nil
}

// writePage answers a forward cursor page.
func writePage[T any](w http.ResponseWriter, items []store.Item[T], lq store.ListQuery, order string) {
	writePageOf(w, items, lq, order, func(v T) T { return v })
}

// writePageOf answers a forward cursor page of what view shows of items.
func writePageOf[T, V any](w http.ResponseWriter, items []store.Item[T], lq store.ListQuery, order string, view func(T) V) {
	page := ma.Page[V]{Data: make([]V, len(items))}
	for i, it := range items {
		page.Data[i] = view(it.Value)
	}
	if len(items) == lq.Limit {
		page.NextPage = cursor{Pos: items[len(items)-1].Pos, Order: order}.encode()
	}
	writeJSON(w, page)
}

func (a *agentsAPI) listAgents(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	items, err := a.st.ListAgents(r.Context(), lq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}

func (a *agentsAPI) listAgentVersions(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "desc")
	if err != nil {
		return err
	}
	items, err := a.st.ListAgentVersions(r.Context(), r.PathValue("id"), lq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}
