package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// agentRef is a session's agent: an id string, {type:"agent",id,version} or
// {type:"agent_with_overrides",...}.
type agentRef struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Version    int64           `json:"version"`
	Model      modelParam      `json:"model"`
	System     optString       `json:"system"`
	Tools      *[]toolParam    `json:"tools"`
	MCPServers *[]ma.MCPServer `json:"mcp_servers"`
	Skills     *[]skillParam   `json:"skills"`
	raw        map[string]json.RawMessage
}

func (a *agentRef) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		a.Type = "agent"
		return json.Unmarshal(b, &a.ID)
	}
	type plain agentRef
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if err := checkUnknownAt("agent", b, &p); err != nil {
		return err
	}
	*a = agentRef(p)
	return json.Unmarshal(b, &a.raw)
}

// sessionStore is what the session handlers read of the store themselves
// (their changes go through the sessions service): the agent a new
// session runs, and sessions. Server.scope reads sessions through it too.
type sessionStore interface {
	GetAgent(ctx context.Context, id string, version int64) (ma.Agent, error)
	GetSession(ctx context.Context, id string) (ma.Session, error)
	ListSessions(ctx context.Context, q store.SessionQuery) ([]store.Item[ma.Session], error)
}

// resolveAgent returns the agent snapshot a new session runs with.
func (s *Server) resolveAgent(ctx context.Context, ref *agentRef) (ma.SessionAgent, error) {
	if err := checkAgentRef(ref); err != nil {
		return ma.SessionAgent{}, err
	}
	a, err := s.sessionRows.GetAgent(ctx, ref.ID, ref.Version)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return ma.SessionAgent{}, notFound("agent: %s", trimStore(err))
		}
		return ma.SessionAgent{}, err
	}
	if a.ArchivedAt != nil {
		return ma.SessionAgent{}, badRequest("agent: %s is archived; new sessions cannot use it", a.ID)
	}
	sa := ma.SessionAgent{ID: a.ID, Type: "agent", Name: a.Name, Description: a.Description, System: a.System, Model: a.Model,
		Tools: a.Tools, MCPServers: a.MCPServers, Skills: a.Skills, Multiagent: a.Multiagent, Version: a.Version}
	skillsGiven := false
	if ref.Type == "agent_with_overrides" {
		if skillsGiven, err = s.applyAgentOverrides(ctx, ref, &sa); err != nil {
			return sa, err
		}
	}
	if !skillsGiven {
		if err := s.checkSkills(ctx, "agent.skills", sa.Skills); err != nil {
			return sa, err
		}
	}
	// The roster's full definitions; the overrides above apply to the
	// agent and its self entries only.
	if sa.Multiagent, err = s.agentRules().Snapshot(ctx, sa); err != nil {
		return sa, agentError(err)
	}
	return sa, nil
}

// checkAgentRef checks the type and id of a session's agent reference.
func checkAgentRef(ref *agentRef) error {
	switch ref.Type {
	case "agent", "agent_with_overrides":
	case "":
		return badRequest("agent.type: required")
	default:
		return badRequest("agent.type: must be agent or agent_with_overrides; got %q", ref.Type)
	}
	if ref.ID == "" {
		return badRequest("agent: an agent id is required")
	}
	return nil
}

// applyAgentOverrides applies the fields an agent_with_overrides reference
// gives to the agent snapshot sa, and reports whether it gave the skills
// (which it then has checked).
func (s *Server) applyAgentOverrides(ctx context.Context, ref *agentRef, sa *ma.SessionAgent) (skillsGiven bool, err error) {
	if _, ok := ref.raw["model"]; ok {
		if !ref.Model.set {
			return false, badRequest("agent.model: cannot be cleared")
		}
		if err := ref.Model.validate(); err != nil {
			return false, err
		}
		if err := s.checkModel("agent.model", ref.Model.ID); err != nil {
			return false, err
		}
		sa.Model = ref.Model.ModelConfig
	}
	if ref.System.Set {
		sa.System = ref.System.Value
	}
	if _, ok := ref.raw["skills"]; ok {
		var params []skillParam
		if ref.Skills != nil {
			params = *ref.Skills
		}
		if sa.Skills, err = s.resolveSkills(ctx, "agent.skills", params); err != nil {
			return false, err
		}
		skillsGiven = true
	}
	if err := overrideAgentTools(ref, sa); err != nil {
		return skillsGiven, err
	}
	if err := checkWebTools(sa.Model.ID, sa.Tools); err != nil {
		return skillsGiven, fieldPrefix("agent.", err)
	}
	return skillsGiven, nil
}

// overrideAgentTools resolves the tools and MCP servers of an
// agent_with_overrides reference into sa when it gives either: a field
// it does not give keeps the agent's.
func overrideAgentTools(ref *agentRef, sa *ma.SessionAgent) error {
	_, toolsGiven := ref.raw["tools"]
	_, serversGiven := ref.raw["mcp_servers"]
	if !toolsGiven && !serversGiven {
		return nil
	}
	servers := sa.MCPServers
	if serversGiven {
		servers = []ma.MCPServer{}
		if ref.MCPServers != nil {
			servers = *ref.MCPServers
		}
	}
	params := toolParamsOf(sa.Tools)
	if toolsGiven {
		params = nil
		if ref.Tools != nil {
			params = *ref.Tools
		}
	}
	tools, err := resolveTools(params, servers)
	if err != nil {
		return err
	}
	sa.Tools, sa.MCPServers = tools, servers
	return nil
}

type sessionCreate struct {
	Agent         *agentRef         `json:"agent"`
	EnvironmentID *string           `json:"environment_id"`
	Title         string            `json:"title"`
	Metadata      map[string]string `json:"metadata"`
	Resources     []json.RawMessage `json:"resources"`
	VaultIDs      []string          `json:"vault_ids"`
	InitialEvents []rawView         `json:"initial_events"` // slices of the request body
	Budget        json.RawMessage   `json:"budget"`
}

// createSession creates a session. Sent with an Idempotency-Key, the
// session is recorded with its creation, and the request repeated with
// the key answers it as first created.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	idem, err := s.idempotency(r)
	if err != nil {
		return err
	}
	var p sessionCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if done, err := s.replayOutcome(w, r, idem); done || err != nil {
		return err
	}
	d, tokens, err := s.sessionDraft(r, p)
	if err != nil {
		return err
	}
	sess, err := s.cfg.Sessions.Prepare(r.Context(), d)
	if err != nil {
		return sessionError(err)
	}
	// The tokens are stored first: the session may start at once.
	for rid, tok := range tokens {
		if err := s.storeToken(r.Context(), sess.ID, rid, tok); err != nil {
			return err
		}
	}
	id := sess.ID
	sess, err = s.cfg.Sessions.Create(r.Context(), sess, d.Initial, idem.record(func(tx store.Tx) ([]byte, error) {
		return jsonLine(withStats(*tx.Session()))
	}))
	if err != nil {
		for rid := range tokens {
			s.resourceRows.SetRepositoryToken(context.WithoutCancel(r.Context()), id, rid, nil)
		}
		return s.keyRecorded(w, r, idem, err)
	}
	if idem != nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write(idem.response)
		return nil
	}
	writeJSON(w, withStats(sess))
	return nil
}

// sessionDraft decodes what a create request names (its agent, resources
// and initial events) into the draft the sessions service checks; tokens
// are the authorization tokens of its repositories, by resource id.
func (s *Server) sessionDraft(r *http.Request, p sessionCreate) (sessions.Draft, map[string]string, error) {
	if p.Agent == nil {
		return sessions.Draft{}, nil, badRequest("agent: required")
	}
	d := sessions.Draft{Title: p.Title, Metadata: p.Metadata, VaultIDs: p.VaultIDs}
	budget, err := sessions.ParseBudget(p.Budget)
	if err != nil {
		return d, nil, sessionError(err)
	}
	d.Budget = budget
	if p.EnvironmentID != nil {
		d.EnvironmentID = *p.EnvironmentID
	}
	resources, tokens, err := s.decodeResources(r.Context(), p.Resources)
	if err != nil {
		return d, nil, err
	}
	d.Resources, d.Tokens = resources, len(tokens) > 0
	if d.Initial, err = s.initialEvents(r.Context(), p.InitialEvents); err != nil {
		return d, nil, err
	}
	if d.Agent, err = s.resolveAgent(r.Context(), p.Agent); err != nil {
		return d, nil, err
	}
	return d, tokens, nil
}

// sessionError answers what the sessions service refuses: 409, 404 or
// 400 as it says.
func sessionError(err error) error {
	var re *sessions.RejectedError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &re):
		return err
	case re.Conflict:
		return conflict("%s", re.Message)
	case re.NotFound:
		return notFound("%s", re.Message)
	}
	return badRequest("%s", re.Message)
}

// initialEvents decodes the initial_events of a create request (the
// sessions service checks what they may be).
func (s *Server) initialEvents(ctx context.Context, raws []rawView) ([]ma.Event, error) {
	if len(raws) > sessions.MaxInitialEvents {
		return nil, badRequest("initial_events: at most %d events, got %d", sessions.MaxInitialEvents, len(raws))
	}
	initial := make([]ma.Event, 0, len(raws))
	for i, raw := range raws {
		ev, err := decodeEventParam(fmt.Sprintf("initial_events[%d]", i), json.RawMessage(raw))
		if err != nil {
			return nil, err
		}
		if err := s.checkFiles(ctx, fmt.Sprintf("initial_events[%d].content", i), ev.Content); err != nil {
			return nil, err
		}
		if err := resolveRubric(ctx, s.cfg.Store, fmt.Sprintf("initial_events[%d]", i), &ev); err != nil {
			return nil, err
		}
		initial = append(initial, ev)
	}
	return initial, nil
}

// withStats fills the figures computed at read time, and leaves out what
// reins keeps for itself.
func withStats(s ma.Session) ma.Session {
	s = s.Public()
	if t, err := time.Parse(time.RFC3339Nano, s.CreatedAt); err == nil {
		s.Stats.DurationSeconds = time.Since(t).Seconds()
	}
	return s
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.sessionRows.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, withStats(sess))
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "desc")
	if err != nil {
		return err
	}
	q := query{r}
	sq := store.SessionQuery{ListQuery: lq, AgentID: q.str("agent_id"), EnvironmentID: q.str("environment_id"),
		MemoryStoreID: q.str("memory_store_id"), DeploymentID: q.str("deployment_id")}
	if sq.Statuses, err = q.enums("statuses", "status", sessionStatuses); err != nil {
		return err
	}
	if sq.StopReasons, err = q.enums("stop_reasons", "stop reason", stopReasons); err != nil {
		return err
	}
	if sq.AgentVersion, err = q.int64("agent_version"); err != nil {
		return err
	}
	if sq.CreatedGT, err = q.time("created_at[gt]"); err != nil {
		return err
	}
	if sq.CreatedLT, err = q.time("created_at[lt]"); err != nil {
		return err
	}
	items, err := s.sessionRows.ListSessions(r.Context(), sq)
	if err != nil {
		return err
	}
	page := ma.BidirectionalPage[ma.Session]{Data: make([]ma.Session, len(items))}
	for i, it := range items {
		page.Data[i] = withStats(it.Value)
	}
	if len(items) > 0 {
		// A page reached backwards always has a next page; a forward page
		// has one when it is full.
		if len(items) == lq.Limit || lq.Before > 0 {
			page.NextPage = cursor{Pos: items[len(items)-1].Pos, Order: order}.encode()
		}
		if lq.After > 0 || (lq.Before > 0 && len(items) == lq.Limit) {
			page.PrevPage = cursor{Pos: items[0].Pos, Order: order, Prev: true}.encode()
		}
	}
	writeJSON(w, page)
	return nil
}

type sessionUpdate struct {
	Title    optString     `json:"title"`
	Metadata metadataPatch `json:"metadata"`
	Agent    *struct {
		Tools      *[]toolParam    `json:"tools"`
		MCPServers *[]ma.MCPServer `json:"mcp_servers"`
	} `json:"agent"`
	VaultIDs json.RawMessage `json:"vault_ids"`
	Budget   json.RawMessage `json:"budget"`
}

func (s *Server) updateSession(w http.ResponseWriter, r *http.Request) error {
	var p sessionUpdate
	raw, err := decodePresent(r, &p)
	if err != nil {
		return err
	}
	if _, ok := raw["vault_ids"]; ok {
		return badRequest("vault_ids: cannot be changed after the session is created")
	}
	patch := sessions.Patch{Metadata: p.Metadata}
	if _, ok := raw["budget"]; ok {
		if patch.Budget, err = sessions.ParseBudget(p.Budget); err != nil {
			return sessionError(err)
		}
		patch.SetBudget = true
	}
	if p.Title.Set {
		patch.Title = &p.Title.Value
	}
	if a := p.Agent; a != nil {
		patch.Tools = func(cur ma.SessionAgent) ([]ma.Tool, []ma.MCPServer, error) {
			servers := cur.MCPServers
			if a.MCPServers != nil {
				servers = *a.MCPServers
			}
			params := toolParamsOf(cur.Tools)
			if a.Tools != nil {
				params = *a.Tools
			}
			tools, err := resolveTools(params, servers)
			if err != nil {
				return nil, nil, fieldPrefix("agent.", err)
			}
			if err := checkWebTools(cur.Model.ID, tools); err != nil {
				return nil, nil, fieldPrefix("agent.", err)
			}
			return tools, servers, nil
		}
	}
	sess, err := s.cfg.Sessions.Patch(r.Context(), r.PathValue("id"), patch)
	if err != nil {
		return sessionError(err)
	}
	writeJSON(w, withStats(sess))
	return nil
}

func fieldPrefix(prefix string, err error) error {
	if ae, ok := err.(*apiError); ok {
		c := *ae
		c.message = prefix + c.message
		return &c
	}
	return err
}

func (s *Server) archiveSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.cfg.Sessions.Archive(r.Context(), r.PathValue("id"))
	if err != nil {
		return sessionError(err)
	}
	s.cfg.Harness.End(sess.ID)
	if s.cfg.Lifecycle != nil {
		s.cfg.Lifecycle.SessionEnded(r.Context(), &sess, false)
	}
	writeJSON(w, withStats(sess))
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	sess, err := s.cfg.Sessions.Delete(r.Context(), id)
	if err != nil {
		return sessionError(err)
	}
	s.cfg.Harness.End(id)
	if s.cfg.Lifecycle != nil {
		s.cfg.Lifecycle.SessionEnded(r.Context(), &sess, true)
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "session_deleted"})
	return nil
}
