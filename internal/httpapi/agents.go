package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

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

func (m *modelParam) validate() error {
	if m.ID == "" {
		return badRequest("model: required")
	}
	if len(m.ID) > 256 {
		return badRequest("model: id longer than 256 characters")
	}
	if m.Effort != nil && !slices.Contains([]string{"low", "medium", "high", "xhigh", "max"}, m.Effort.Type) {
		return badRequest("model.effort: must be one of low, medium, high, xhigh, max; got %q", m.Effort.Type)
	}
	if m.Speed != "" && m.Speed != "standard" && m.Speed != "fast" {
		return badRequest("model.speed: must be standard or fast; got %q", m.Speed)
	}
	return nil
}

type toolConfigParam struct {
	Name             string               `json:"name"`
	Enabled          *bool                `json:"enabled"`
	PermissionPolicy *ma.PermissionPolicy `json:"permission_policy"`
}

type toolParam struct {
	Type          string            `json:"type"`
	MCPServerName string            `json:"mcp_server_name"`
	DefaultConfig *toolConfigParam  `json:"default_config"`
	Configs       []toolConfigParam `json:"configs"`
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	InputSchema   json.RawMessage   `json:"input_schema"`
}

var customToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func resolveConfig(field string, c *toolConfigParam, defaultPolicy string) (*ma.ToolConfig, error) {
	if c == nil {
		return nil, nil
	}
	out := &ma.ToolConfig{Name: c.Name, Enabled: true, PermissionPolicy: &ma.PermissionPolicy{Type: defaultPolicy}}
	if c.Enabled != nil {
		out.Enabled = *c.Enabled
	}
	if c.PermissionPolicy != nil {
		if t := c.PermissionPolicy.Type; t != ma.PolicyAlwaysAllow && t != ma.PolicyAlwaysAsk && t != ma.PolicyAuto {
			return nil, badRequest("%s.permission_policy.type: must be always_allow, always_ask or auto; got %q", field, t)
		}
		out.PermissionPolicy = &ma.PermissionPolicy{Type: c.PermissionPolicy.Type}
	}
	return out, nil
}

// checkWebTools refuses web_search enabled for a model other than Claude:
// for Claude models (claude-*) the web tools are Anthropic's server tools,
// passed to the Messages API (which cannot wait for a confirmation: their
// policy must be always_allow); for others reins runs web_fetch itself but
// has no search backend.
func checkWebTools(modelID string, tools []ma.Tool) error {
	server := harness.ServerWebTools(modelID)
	for i, t := range tools {
		if t.Type != ma.ToolTypeAgentToolset {
			continue
		}
		for j, c := range t.Configs {
			web := c.Name == toolset.WebSearch || c.Name == toolset.WebFetch
			if server && web && c.Enabled && c.PermissionPolicy != nil && c.PermissionPolicy.Type != ma.PolicyAlwaysAllow {
				return badRequest("tools[%d].configs[%d]: %s for Claude models is Anthropic's server tool, which runs during the model call and cannot wait for a confirmation: its permission_policy must be always_allow (got %s)", i, j, c.Name, c.PermissionPolicy.Type)
			}
			if !server && c.Name == toolset.WebSearch && c.Enabled {
				return badRequest("tools[%d].configs[%d]: web_search is not supported for %s by this server: it has no search backend (web_search is Anthropic's server tool, for Claude models only), so the tool cannot be enabled (set enabled: false, or leave it out)", i, j, modelID)
			}
		}
	}
	return nil
}

// resolveTools validates tools and mcp_servers and returns the resolved
// tools as the API echoes them.
func resolveTools(params []toolParam, servers []ma.MCPServer) ([]ma.Tool, error) {
	if len(params) > 128 {
		return nil, badRequest("tools: at most 128 tools, got %d", len(params))
	}
	if len(servers) > 20 {
		return nil, badRequest("mcp_servers: at most 20 servers, got %d", len(servers))
	}
	serverNames := map[string]bool{}
	for i, s := range servers {
		f := fmt.Sprintf("mcp_servers[%d]", i)
		if s.Type != "url" {
			return nil, badRequest("%s.type: must be \"url\"; got %q", f, s.Type)
		}
		if err := checkLen(f+".name", s.Name, 1, 255); err != nil {
			return nil, err
		}
		if serverNames[s.Name] {
			return nil, badRequest("%s.name: duplicate server name %q", f, s.Name)
		}
		if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
			return nil, badRequest("%s.url: must be an http(s) URL; got %q", f, s.URL)
		}
		serverNames[s.Name] = true
	}
	referenced := map[string]bool{}
	names := map[string]bool{}
	out := make([]ma.Tool, 0, len(params))
	toolsets := 0
	for i, p := range params {
		f := fmt.Sprintf("tools[%d]", i)
		switch p.Type {
		case ma.ToolTypeAgentToolset, ma.ToolTypeMCPToolset:
			policy := ma.PolicyAlwaysAllow
			if p.Type == ma.ToolTypeMCPToolset {
				policy = ma.PolicyAlwaysAsk
				if !serverNames[p.MCPServerName] {
					return nil, badRequest("%s.mcp_server_name: no MCP server named %q in mcp_servers", f, p.MCPServerName)
				}
				if referenced[p.MCPServerName] {
					return nil, badRequest("%s.mcp_server_name: server %q is referenced by two toolsets", f, p.MCPServerName)
				}
				referenced[p.MCPServerName] = true
			} else {
				toolsets++
				if toolsets > 1 {
					return nil, badRequest("%s: only one %s is allowed", f, ma.ToolTypeAgentToolset)
				}
			}
			def, err := resolveConfig(f+".default_config", p.DefaultConfig, policy)
			if err != nil {
				return nil, err
			}
			if def == nil {
				def = &ma.ToolConfig{Enabled: true, PermissionPolicy: &ma.PermissionPolicy{Type: policy}}
			}
			def.Name = ""
			t := ma.Tool{Type: p.Type, MCPServerName: p.MCPServerName, DefaultConfig: def, Configs: []ma.ToolConfig{}}
			seen := map[string]bool{}
			for j, c := range p.Configs {
				cf := fmt.Sprintf("%s.configs[%d]", f, j)
				if c.Name == "" {
					return nil, badRequest("%s.name: required", cf)
				}
				if known := toolset.AgentToolset(); p.Type == ma.ToolTypeAgentToolset && !slices.Contains(known, c.Name) {
					return nil, badRequest("%s.name: unknown tool %q (known: %s)", cf, c.Name, strings.Join(known, ", "))
				}
				if seen[c.Name] {
					return nil, badRequest("%s.name: duplicate config for %q", cf, c.Name)
				}
				seen[c.Name] = true
				// Inherit the toolset default for omitted values.
				rc := &ma.ToolConfig{Name: c.Name, Enabled: def.Enabled, PermissionPolicy: &ma.PermissionPolicy{Type: def.PermissionPolicy.Type}}
				if c.Enabled != nil {
					rc.Enabled = *c.Enabled
				}
				if c.PermissionPolicy != nil {
					r, err := resolveConfig(cf, &toolConfigParam{PermissionPolicy: c.PermissionPolicy}, policy)
					if err != nil {
						return nil, err
					}
					rc.PermissionPolicy = r.PermissionPolicy
				}
				t.Configs = append(t.Configs, *rc)
			}
			if p.Type == ma.ToolTypeAgentToolset {
				for _, n := range toolset.AgentToolset() {
					if names[n] {
						return nil, badRequest("%s: tool name %q is used twice", f, n)
					}
					names[n] = true
				}
			}
			out = append(out, t)
		case ma.ToolTypeCustom:
			if !customToolName.MatchString(p.Name) {
				return nil, badRequest("%s.name: must be 1 to 128 characters of letters, digits, _ and -; got %q", f, p.Name)
			}
			if names[p.Name] {
				return nil, badRequest("%s.name: tool name %q is used twice", f, p.Name)
			}
			names[p.Name] = true
			if err := checkLen(f+".description", p.Description, 1, 4096); err != nil {
				return nil, err
			}
			var schema struct {
				Type string `json:"type"`
			}
			if len(p.InputSchema) == 0 || json.Unmarshal(p.InputSchema, &schema) != nil || schema.Type != "object" {
				return nil, badRequest("%s.input_schema: must be a JSON Schema object with \"type\": \"object\"", f)
			}
			out = append(out, ma.Tool{Type: p.Type, Name: p.Name, Description: p.Description, InputSchema: p.InputSchema})
		case "":
			return nil, badRequest("%s.type: required", f)
		default:
			return nil, badRequest("%s.type: unknown tool type %q (known: %s, %s, %s)", f, p.Type, ma.ToolTypeAgentToolset, ma.ToolTypeMCPToolset, ma.ToolTypeCustom)
		}
	}
	for _, s := range servers {
		if !referenced[s.Name] {
			return nil, badRequest("mcp_servers: server %q is not referenced by any mcp_toolset in tools", s.Name)
		}
	}
	return out, nil
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

// unsupported refuses the fields this server does not implement yet when
// they carry a value (null means "none").
func unsupported(fields map[string]json.RawMessage) error {
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if v := fields[name]; len(v) > 0 && string(v) != "null" {
			return badRequest("%s: not supported by this server yet", name)
		}
	}
	return nil
}

// createAgent creates an agent (version 1). Sent with an
// Idempotency-Key, the agent is recorded with its creation, and the
// request repeated with the key answers it as first created.
func (s *Server) createAgent(w http.ResponseWriter, r *http.Request) error {
	idem, err := s.idempotency(r)
	if err != nil {
		return err
	}
	var p agentCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if done, err := s.replayOutcome(w, r, idem); done || err != nil {
		return err
	}
	if p.Name == nil {
		return badRequest("name: required")
	}
	if err := checkLen("name", *p.Name, 1, 256); err != nil {
		return err
	}
	if err := p.Model.validate(); err != nil {
		return err
	}
	if err := checkLen("description", p.Description, 0, 2048); err != nil {
		return err
	}
	if err := checkLen("system", p.System, 0, 100000); err != nil {
		return err
	}
	if err := unsupported(map[string]json.RawMessage{"multiagent": p.Multiagent, "execution_identity": p.ExecutionIdentity}); err != nil {
		return err
	}
	if err := s.checkModel("model", p.Model.ID); err != nil {
		return err
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return err
	}
	servers := p.MCPServers
	if servers == nil {
		servers = []ma.MCPServer{}
	}
	tools, err := resolveTools(p.Tools, servers)
	if err != nil {
		return err
	}
	if err := checkWebTools(p.Model.ID, tools); err != nil {
		return err
	}
	skills, err := s.resolveSkills(r.Context(), "skills", p.Skills)
	if err != nil {
		return err
	}
	now := ma.Time(time.Now())
	meta := ma.Metadata(p.Metadata)
	if meta == nil {
		meta = ma.Metadata{}
	}
	a := ma.Agent{ID: ids.New(ids.Agent), Type: "agent", Name: *p.Name, Description: p.Description, System: p.System,
		Model: p.Model.ModelConfig, Tools: tools, MCPServers: servers, Skills: skills, Multiagent: ma.Raw("null"),
		ExecutionIdentity: ma.Raw("null"), Metadata: meta, Version: 1, CreatedAt: now, UpdatedAt: now}
	return s.createKept(w, r, idem, a, func(ctx context.Context) error { return s.cfg.Store.CreateAgent(ctx, a) })
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	v, err := q.int64("version")
	if err != nil {
		return err
	}
	a, err := s.cfg.Store.GetAgent(r.Context(), r.PathValue("id"), v)
	if err != nil {
		return err
	}
	writeJSON(w, a)
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
	// Multiagent and ExecutionIdentity are accepted when null only.
	Multiagent        json.RawMessage `json:"multiagent"`
	ExecutionIdentity json.RawMessage `json:"execution_identity"`
	Metadata          metadataPatch   `json:"metadata"`
}

func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request) error {
	var p agentUpdate
	// raw tells which fields were present: an explicit null for tools or
	// mcp_servers clears them, like [].
	raw, err := decodePresent(r, &p)
	if err != nil {
		return err
	}
	if err := unsupported(map[string]json.RawMessage{"multiagent": p.Multiagent, "execution_identity": p.ExecutionIdentity}); err != nil {
		return err
	}
	if p.Model.set {
		if err := s.checkModel("model", p.Model.ID); err != nil {
			return err
		}
	}
	// Skills are resolved to their versions outside the transaction.
	var skills []ma.SkillRef
	if _, ok := raw["skills"]; ok {
		var params []skillParam
		if p.Skills != nil {
			params = *p.Skills
		}
		if skills, err = s.resolveSkills(r.Context(), "skills", params); err != nil {
			return err
		}
	}
	a, err := s.cfg.Store.UpdateAgent(r.Context(), r.PathValue("id"), func(cur ma.Agent) (ma.Agent, bool, error) {
		if cur.ArchivedAt != nil {
			return cur, false, conflict("agent %s is archived and read-only", cur.ID)
		}
		if p.Version != nil && *p.Version != cur.Version {
			return cur, false, conflict("version: the agent is at version %d, not %d", cur.Version, *p.Version)
		}
		next := cur
		next.Tools = slices.Clone(cur.Tools)
		if p.Name.Set {
			if p.Name.Null {
				return cur, false, badRequest("name: cannot be cleared")
			}
			if err := checkLen("name", p.Name.Value, 1, 256); err != nil {
				return cur, false, err
			}
			next.Name = p.Name.Value
		}
		if p.Description.Set {
			if err := checkLen("description", p.Description.Value, 0, 2048); err != nil {
				return cur, false, err
			}
			next.Description = p.Description.Value
		}
		if p.System.Set {
			if err := checkLen("system", p.System.Value, 0, 100000); err != nil {
				return cur, false, err
			}
			next.System = p.System.Value
		}
		if p.Model.set {
			if err := p.Model.validate(); err != nil {
				return cur, false, err
			}
			next.Model = p.Model.ModelConfig
		}
		if skills != nil {
			next.Skills = skills
		}
		servers := cur.MCPServers
		if _, ok := raw["mcp_servers"]; ok {
			servers = []ma.MCPServer{}
			if p.MCPServers != nil {
				servers = *p.MCPServers
			}
		}
		_, toolsGiven := raw["tools"]
		if toolsGiven || !reflect.DeepEqual(servers, cur.MCPServers) {
			var params []toolParam
			if toolsGiven {
				if p.Tools != nil {
					params = *p.Tools
				}
			} else {
				params = toolParamsOf(cur.Tools)
			}
			tools, err := resolveTools(params, servers)
			if err != nil {
				return cur, false, err
			}
			next.Tools, next.MCPServers = tools, servers
		}
		if p.Metadata != nil {
			if err := validateMetadataPatch("metadata", cur.Metadata, p.Metadata); err != nil {
				return cur, false, err
			}
			next.Metadata = applyMetadata(cur.Metadata, p.Metadata)
		}
		if err := checkWebTools(next.Model.ID, next.Tools); err != nil {
			return cur, false, err
		}
		if agentEqual(cur, next) {
			return cur, false, nil
		}
		next.Version = cur.Version + 1
		next.UpdatedAt = ma.Time(time.Now())
		return next, true, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, a)
	return nil
}

// toolParamsOf turns resolved tools back into parameters.
func toolParamsOf(tools []ma.Tool) []toolParam {
	out := make([]toolParam, len(tools))
	for i, t := range tools {
		p := toolParam{Type: t.Type, MCPServerName: t.MCPServerName, Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
		if t.DefaultConfig != nil {
			en := t.DefaultConfig.Enabled
			p.DefaultConfig = &toolConfigParam{Enabled: &en, PermissionPolicy: t.DefaultConfig.PermissionPolicy}
		}
		for _, c := range t.Configs {
			en := c.Enabled
			p.Configs = append(p.Configs, toolConfigParam{Name: c.Name, Enabled: &en, PermissionPolicy: c.PermissionPolicy})
		}
		out[i] = p
	}
	return out
}

func agentEqual(a, b ma.Agent) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func (s *Server) archiveAgent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.cfg.Store.UpdateAgent(r.Context(), r.PathValue("id"), func(cur ma.Agent) (ma.Agent, bool, error) {
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
	writeJSON(w, a)
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

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	items, err := s.cfg.Store.ListAgents(r.Context(), lq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}

func (s *Server) listAgentVersions(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "desc")
	if err != nil {
		return err
	}
	items, err := s.cfg.Store.ListAgentVersions(r.Context(), r.PathValue("id"), lq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}
