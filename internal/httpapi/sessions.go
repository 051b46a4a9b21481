package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/reinsdev/reins/internal/ids"
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

// resolveAgent returns the agent snapshot a new session runs with.
func (s *Server) resolveAgent(r *http.Request, ref *agentRef) (ma.SessionAgent, error) {
	switch ref.Type {
	case "agent", "agent_with_overrides":
	case "":
		return ma.SessionAgent{}, badRequest("agent.type: required")
	default:
		return ma.SessionAgent{}, badRequest("agent.type: must be agent or agent_with_overrides; got %q", ref.Type)
	}
	if ref.ID == "" {
		return ma.SessionAgent{}, badRequest("agent: an agent id is required")
	}
	a, err := s.cfg.Store.GetAgent(r.Context(), ref.ID, ref.Version)
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
		if _, ok := ref.raw["model"]; ok {
			if !ref.Model.set {
				return sa, badRequest("agent.model: cannot be cleared")
			}
			if err := ref.Model.validate(); err != nil {
				return sa, err
			}
			if err := s.checkModel("agent.model", ref.Model.ID); err != nil {
				return sa, err
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
			if sa.Skills, err = s.resolveSkills(r.Context(), "agent.skills", params); err != nil {
				return sa, err
			}
			skillsGiven = true
		}
		_, toolsGiven := ref.raw["tools"]
		_, serversGiven := ref.raw["mcp_servers"]
		if toolsGiven || serversGiven {
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
				return sa, err
			}
			sa.Tools, sa.MCPServers = tools, servers
		}
		if err := checkWebTools(sa.Model.ID, sa.Tools); err != nil {
			return sa, fieldPrefix("agent.", err)
		}
	}
	if !skillsGiven {
		if err := s.checkSkills(r.Context(), "agent.skills", sa.Skills); err != nil {
			return sa, err
		}
	}
	return sa, nil
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
	n, err := s.newSession(r, p)
	if err != nil {
		return err
	}
	sess, tokens := n.sess, n.tokens
	// The tokens are stored first: the session may start at once.
	for rid, tok := range tokens {
		if err := s.storeToken(r.Context(), sess.ID, rid, tok); err != nil {
			return err
		}
	}
	id := sess.ID
	sess, err = s.cfg.Sessions.Create(r.Context(), sess, n.initial, idem.record(func(tx store.Tx) ([]byte, error) {
		return jsonLine(withStats(*tx.Session()))
	}))
	if err != nil {
		for rid := range tokens {
			s.cfg.Store.SetRepositoryToken(context.WithoutCancel(r.Context()), id, rid, nil)
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

// newSession is a session to create, as a create request asks for it.
type newSession struct {
	sess    ma.Session
	initial []ma.Event
	// tokens are the sealed-to-be tokens of its github_repository
	// resources, by resource id.
	tokens map[string]string
}

// newSession checks a create request and returns the session it asks
// for.
func (s *Server) newSession(r *http.Request, p sessionCreate) (newSession, error) {
	var none newSession
	if p.Agent == nil {
		return none, badRequest("agent: required")
	}
	if p.EnvironmentID == nil || *p.EnvironmentID == "" {
		return none, badRequest("environment_id: required")
	}
	if err := checkLen("title", p.Title, 0, 1024); err != nil {
		return none, err
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return none, err
	}
	resources, tokens, err := s.decodeResources(r.Context(), p.Resources)
	if err != nil {
		return none, err
	}
	if len(p.Budget) > 0 && string(p.Budget) != "null" {
		return none, badRequest("budget: session budgets are not supported by this server yet")
	}
	if len(p.VaultIDs) > 20 {
		return none, badRequest("vault_ids: at most 20 vaults, got %d", len(p.VaultIDs))
	}
	if err := s.checkVaults(r.Context(), p.VaultIDs); err != nil {
		return none, err
	}
	initial, err := s.initialEvents(r.Context(), p.InitialEvents)
	if err != nil {
		return none, err
	}
	agent, err := s.resolveAgent(r, p.Agent)
	if err != nil {
		return none, err
	}
	env, err := s.cfg.Store.GetEnvironment(r.Context(), *p.EnvironmentID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return none, notFound("environment_id: environment %s not found", *p.EnvironmentID)
		}
		return none, err
	}
	if env.ArchivedAt != nil {
		return none, badRequest("environment_id: environment %s is archived; new sessions cannot use it", env.ID)
	}
	if len(tokens) > 0 && env.Config.Type != "cloud" {
		return none, badRequest("resources: authorization_token needs a cloud environment: the token is given to the clone by the cloud sandbox's egress proxy")
	}
	meta := ma.Metadata(p.Metadata)
	if meta == nil {
		meta = ma.Metadata{}
	}
	vaultIDs := p.VaultIDs
	if vaultIDs == nil {
		vaultIDs = []string{}
	}
	now := ma.Time(time.Now())
	sess := ma.Session{ID: ids.New(ids.Session), Type: "session", Title: p.Title, Status: ma.StatusIdle, EnvironmentID: env.ID,
		Agent: agent, Resources: resources, Metadata: meta, VaultIDs: vaultIDs, OutcomeEvaluations: []ma.Raw{},
		Budget: ma.Raw("null"), CreatedAt: now, UpdatedAt: now}
	return newSession{sess: sess, initial: initial, tokens: tokens}, nil
}

// checkVaults checks the vault_ids of a create request: each one's vault
// exists and is not archived.
func (s *Server) checkVaults(ctx context.Context, vaultIDs []string) error {
	for i, id := range vaultIDs {
		v, err := s.cfg.Store.GetVault(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("vault_ids[%d]: vault %s not found", i, id)
		}
		if err != nil {
			return err
		}
		if v.ArchivedAt != nil {
			return badRequest("vault_ids[%d]: vault %s is archived", i, id)
		}
	}
	return nil
}

// initialEvents decodes and checks the initial_events of a create
// request: at most 50 user messages.
func (s *Server) initialEvents(ctx context.Context, raws []rawView) ([]ma.Event, error) {
	if len(raws) > 50 {
		return nil, badRequest("initial_events: at most 50 events, got %d", len(raws))
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
		if ev.Type != ma.EventUserMessage {
			return nil, badRequest("initial_events[%d].type: only user.message is accepted here; got %q", i, ev.Type)
		}
		initial = append(initial, ev)
	}
	return initial, nil
}

// withStats fills the figures computed at read time.
func withStats(s ma.Session) ma.Session {
	if t, err := time.Parse(time.RFC3339Nano, s.CreatedAt); err == nil {
		s.Stats.DurationSeconds = time.Since(t).Seconds()
	}
	return s
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.cfg.Store.GetSession(r.Context(), r.PathValue("id"))
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
	sq := store.SessionQuery{ListQuery: lq, AgentID: q.str("agent_id"), EnvironmentID: q.str("environment_id")}
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
	items, err := s.cfg.Store.ListSessions(r.Context(), sq)
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
	if len(p.Budget) > 0 && string(p.Budget) != "null" {
		return badRequest("budget: session budgets are not supported by this server yet")
	}
	sess, err := s.cfg.Sessions.Update(r.Context(), r.PathValue("id"), func(tx store.Tx) error {
		cur := tx.Session()
		if cur.ArchivedAt != nil {
			return conflict("session %s is archived and read-only", cur.ID)
		}
		changed := &ma.Event{Type: ma.EventSessionUpdated}
		touched := false
		if p.Title.Set {
			if err := checkLen("title", p.Title.Value, 0, 1024); err != nil {
				return err
			}
			if p.Title.Value != cur.Title {
				cur.Title = p.Title.Value
				t := cur.Title
				changed.Title = &t
				touched = true
			}
		}
		if p.Metadata != nil {
			if err := validateMetadataPatch("metadata", cur.Metadata, p.Metadata); err != nil {
				return err
			}
			cur.Metadata = applyMetadata(cur.Metadata, p.Metadata)
			changed.Metadata = cur.Metadata
			touched = true
		}
		if p.Agent != nil {
			if cur.Status == ma.StatusRunning {
				return conflict("agent: the session is running; change its tools while it is idle")
			}
			servers := cur.Agent.MCPServers
			if p.Agent.MCPServers != nil {
				servers = *p.Agent.MCPServers
			}
			params := toolParamsOf(cur.Agent.Tools)
			if p.Agent.Tools != nil {
				params = *p.Agent.Tools
			}
			tools, err := resolveTools(params, servers)
			if err != nil {
				return fieldPrefix("agent.", err)
			}
			if err := checkWebTools(cur.Agent.Model.ID, tools); err != nil {
				return fieldPrefix("agent.", err)
			}
			cur.Agent.Tools, cur.Agent.MCPServers = tools, servers
			b, _ := json.Marshal(map[string]any{"tools": tools, "mcp_servers": servers})
			changed.Agent = b
			touched = true
		}
		if !touched {
			return nil
		}
		now := ma.Time(time.Now())
		cur.UpdatedAt = now
		changed.ProcessedAt = &now
		return tx.Append(changed)
	})
	if err != nil {
		return err
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
	sess, err := s.cfg.Sessions.Update(r.Context(), r.PathValue("id"), func(tx store.Tx) error {
		cur := tx.Session()
		if cur.ArchivedAt != nil {
			return nil
		}
		if cur.Status == ma.StatusRunning {
			return badRequest("cannot archive session %s while it is running; interrupt it or wait until it is idle", cur.ID)
		}
		now := ma.Time(time.Now())
		cur.ArchivedAt = &now
		cur.UpdatedAt = now
		return nil
	})
	if err != nil {
		return err
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
	sess, err := s.cfg.Store.GetSession(r.Context(), id)
	if err != nil {
		return err
	}
	if sess.Status == ma.StatusRunning {
		return badRequest("cannot delete session %s while it is running; interrupt it or wait until it is idle", id)
	}
	if err := s.cfg.Sessions.Delete(r.Context(), id); err != nil {
		return err
	}
	s.cfg.Harness.End(id)
	if s.cfg.Lifecycle != nil {
		s.cfg.Lifecycle.SessionEnded(r.Context(), &sess, true)
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "session_deleted"})
	return nil
}
