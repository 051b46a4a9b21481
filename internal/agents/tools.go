package agents

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// Bounds of an agent's tools.
const (
	// MaxTools bounds the tools of an agent.
	MaxTools = 128
	// MaxMCPServers bounds the MCP servers of an agent.
	MaxMCPServers = 20
)

// ToolConfigParam is the configuration of one tool of a toolset, or a
// toolset's default, as given: what it omits, it inherits.
type ToolConfigParam struct {
	Name             string               `json:"name"`
	Enabled          *bool                `json:"enabled"`
	PermissionPolicy *ma.PermissionPolicy `json:"permission_policy"`
}

// ToolParam is a tool of an agent as given: a toolset (agent_toolset_*,
// mcp_toolset) or a custom tool.
type ToolParam struct {
	Type          string            `json:"type"`
	MCPServerName string            `json:"mcp_server_name"`
	DefaultConfig *ToolConfigParam  `json:"default_config"`
	Configs       []ToolConfigParam `json:"configs"`
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	InputSchema   json.RawMessage   `json:"input_schema"`
}

var customToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ResolveTools checks tools and the MCP servers their mcp_toolsets name,
// and returns the tools as the API echoes them: every toolset with its
// default config and each config filled from it.
func ResolveTools(params []ToolParam, servers []ma.MCPServer) ([]ma.Tool, error) {
	if len(params) > MaxTools {
		return nil, invalid("tools: at most %d tools, got %d", MaxTools, len(params))
	}
	if len(servers) > MaxMCPServers {
		return nil, invalid("mcp_servers: at most %d servers, got %d", MaxMCPServers, len(servers))
	}
	tr := toolResolver{servers: map[string]bool{}, referenced: map[string]bool{}, names: map[string]bool{}}
	if err := tr.checkServers(servers); err != nil {
		return nil, err
	}
	out := make([]ma.Tool, 0, len(params))
	for i, p := range params {
		t, err := tr.resolve(fmt.Sprintf("tools[%d]", i), p)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	for _, s := range servers {
		if !tr.referenced[s.Name] {
			return nil, invalid("mcp_servers: server %q is not referenced by any mcp_toolset in tools", s.Name)
		}
	}
	return out, nil
}

// toolResolver holds what ResolveTools has seen of an agent's tools.
type toolResolver struct {
	servers    map[string]bool // the names of the MCP servers
	referenced map[string]bool // the servers an mcp_toolset names
	names      map[string]bool // the tool names taken
	toolsets   int             // the agent toolsets
}

// checkServers checks the MCP servers and notes their names.
func (tr *toolResolver) checkServers(servers []ma.MCPServer) error {
	for i, s := range servers {
		f := fmt.Sprintf("mcp_servers[%d]", i)
		if s.Type != "url" {
			return invalid("%s.type: must be \"url\"; got %q", f, s.Type)
		}
		if err := checkLen(f+".name", s.Name, 1, 255); err != nil {
			return err
		}
		if tr.servers[s.Name] {
			return invalid("%s.name: duplicate server name %q", f, s.Name)
		}
		if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
			return invalid("%s.url: must be an http(s) URL; got %q", f, s.URL)
		}
		tr.servers[s.Name] = true
	}
	return nil
}

// resolve checks the tool p, at field f.
func (tr *toolResolver) resolve(f string, p ToolParam) (ma.Tool, error) {
	switch p.Type {
	case ma.ToolTypeAgentToolset, ma.ToolTypeMCPToolset:
		return tr.toolset(f, p)
	case ma.ToolTypeCustom:
		return tr.custom(f, p)
	case "":
		return ma.Tool{}, invalid("%s.type: required", f)
	default:
		return ma.Tool{}, invalid("%s.type: unknown tool type %q (known: %s, %s, %s)", f, p.Type, ma.ToolTypeAgentToolset, ma.ToolTypeMCPToolset, ma.ToolTypeCustom)
	}
}

// toolset checks an agent toolset or an MCP toolset. The default policy
// is always_allow for the agent toolset, always_ask for an MCP server's.
func (tr *toolResolver) toolset(f string, p ToolParam) (ma.Tool, error) {
	policy := ma.PolicyAlwaysAllow
	if p.Type == ma.ToolTypeMCPToolset {
		policy = ma.PolicyAlwaysAsk
		if !tr.servers[p.MCPServerName] {
			return ma.Tool{}, invalid("%s.mcp_server_name: no MCP server named %q in mcp_servers", f, p.MCPServerName)
		}
		if tr.referenced[p.MCPServerName] {
			return ma.Tool{}, invalid("%s.mcp_server_name: server %q is referenced by two toolsets", f, p.MCPServerName)
		}
		tr.referenced[p.MCPServerName] = true
	} else {
		tr.toolsets++
		if tr.toolsets > 1 {
			return ma.Tool{}, invalid("%s: only one %s is allowed", f, ma.ToolTypeAgentToolset)
		}
	}
	def, err := resolveConfig(f+".default_config", p.DefaultConfig, policy)
	if err != nil {
		return ma.Tool{}, err
	}
	if def == nil {
		def = &ma.ToolConfig{Enabled: true, PermissionPolicy: &ma.PermissionPolicy{Type: policy}}
	}
	def.Name = ""
	t := ma.Tool{Type: p.Type, MCPServerName: p.MCPServerName, DefaultConfig: def}
	if t.Configs, err = toolConfigs(f, p, def, policy); err != nil {
		return ma.Tool{}, err
	}
	if p.Type == ma.ToolTypeAgentToolset {
		for _, n := range toolset.AgentToolset() {
			if tr.names[n] {
				return ma.Tool{}, invalid("%s: tool name %q is used twice", f, n)
			}
			tr.names[n] = true
		}
	}
	return t, nil
}

// toolConfigs checks the per-tool configs of toolset p, whose default is
// def, and fills what they omit from def.
func toolConfigs(f string, p ToolParam, def *ma.ToolConfig, policy string) ([]ma.ToolConfig, error) {
	out := []ma.ToolConfig{}
	seen := map[string]bool{}
	for j, c := range p.Configs {
		cf := fmt.Sprintf("%s.configs[%d]", f, j)
		if c.Name == "" {
			return nil, invalid("%s.name: required", cf)
		}
		if known := toolset.AgentToolset(); p.Type == ma.ToolTypeAgentToolset && !slices.Contains(known, c.Name) {
			return nil, invalid("%s.name: unknown tool %q (known: %s)", cf, c.Name, strings.Join(known, ", "))
		}
		if seen[c.Name] {
			return nil, invalid("%s.name: duplicate config for %q", cf, c.Name)
		}
		seen[c.Name] = true
		rc := ma.ToolConfig{Name: c.Name, Enabled: def.Enabled, PermissionPolicy: &ma.PermissionPolicy{Type: def.PermissionPolicy.Type}}
		if c.Enabled != nil {
			rc.Enabled = *c.Enabled
		}
		if c.PermissionPolicy != nil {
			r, err := resolveConfig(cf, &ToolConfigParam{PermissionPolicy: c.PermissionPolicy}, policy)
			if err != nil {
				return nil, err
			}
			rc.PermissionPolicy = r.PermissionPolicy
		}
		out = append(out, rc)
	}
	return out, nil
}

// custom checks a custom tool.
func (tr *toolResolver) custom(f string, p ToolParam) (ma.Tool, error) {
	if !customToolName.MatchString(p.Name) {
		return ma.Tool{}, invalid("%s.name: must be 1 to 128 characters of letters, digits, _ and -; got %q", f, p.Name)
	}
	if tr.names[p.Name] {
		return ma.Tool{}, invalid("%s.name: tool name %q is used twice", f, p.Name)
	}
	tr.names[p.Name] = true
	if err := checkLen(f+".description", p.Description, 1, 4096); err != nil {
		return ma.Tool{}, err
	}
	var schema struct {
		Type string `json:"type"`
	}
	if len(p.InputSchema) == 0 || json.Unmarshal(p.InputSchema, &schema) != nil || schema.Type != "object" {
		return ma.Tool{}, invalid("%s.input_schema: must be a JSON Schema object with \"type\": \"object\"", f)
	}
	return ma.Tool{Type: p.Type, Name: p.Name, Description: p.Description, InputSchema: p.InputSchema}, nil
}

// resolveConfig checks a tool config c at field, defaulting its policy to
// defaultPolicy and its enabled to true. A nil c gives nil.
func resolveConfig(field string, c *ToolConfigParam, defaultPolicy string) (*ma.ToolConfig, error) {
	if c == nil {
		return nil, nil
	}
	out := &ma.ToolConfig{Name: c.Name, Enabled: true, PermissionPolicy: &ma.PermissionPolicy{Type: defaultPolicy}}
	if c.Enabled != nil {
		out.Enabled = *c.Enabled
	}
	if c.PermissionPolicy != nil {
		if t := c.PermissionPolicy.Type; t != ma.PolicyAlwaysAllow && t != ma.PolicyAlwaysAsk && t != ma.PolicyAuto {
			return nil, invalid("%s.permission_policy.type: must be always_allow, always_ask or auto; got %q", field, t)
		}
		out.PermissionPolicy = &ma.PermissionPolicy{Type: c.PermissionPolicy.Type}
	}
	return out, nil
}

// ToolParams turns resolved tools back into parameters, which
// ResolveTools resolves to the same tools: a change of an agent's MCP
// servers checks its tools again with them.
func ToolParams(tools []ma.Tool) []ToolParam {
	out := make([]ToolParam, len(tools))
	for i, t := range tools {
		p := ToolParam{Type: t.Type, MCPServerName: t.MCPServerName, Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
		if t.DefaultConfig != nil {
			en := t.DefaultConfig.Enabled
			p.DefaultConfig = &ToolConfigParam{Enabled: &en, PermissionPolicy: t.DefaultConfig.PermissionPolicy}
		}
		for _, c := range t.Configs {
			en := c.Enabled
			p.Configs = append(p.Configs, ToolConfigParam{Name: c.Name, Enabled: &en, PermissionPolicy: c.PermissionPolicy})
		}
		out[i] = p
	}
	return out
}

// ServerWebTools reports whether the web tools of an agent with this model
// are Anthropic's server tools (Claude models: the Messages API runs them)
// rather than tools reins runs. (harness.ServerWebTools states the same
// rule for the turns.)
func ServerWebTools(modelID string) bool {
	return strings.HasPrefix(modelID, "claude-")
}

// CheckWebTools refuses web_search enabled for a model other than Claude:
// for Claude models (claude-*) the web tools are Anthropic's server tools,
// passed to the Messages API (which cannot wait for a confirmation: their
// policy must be always_allow); for others reins runs web_fetch itself but
// has no search backend.
func CheckWebTools(modelID string, tools []ma.Tool) error {
	server := ServerWebTools(modelID)
	for i, t := range tools {
		if t.Type != ma.ToolTypeAgentToolset {
			continue
		}
		for j, c := range t.Configs {
			web := c.Name == toolset.WebSearch || c.Name == toolset.WebFetch
			if server && web && c.Enabled && c.PermissionPolicy != nil && c.PermissionPolicy.Type != ma.PolicyAlwaysAllow {
				return invalid("tools[%d].configs[%d]: %s for Claude models is Anthropic's server tool, which runs during the model call and cannot wait for a confirmation: its permission_policy must be always_allow (got %s)", i, j, c.Name, c.PermissionPolicy.Type)
			}
			if !server && c.Name == toolset.WebSearch && c.Enabled {
				return invalid("tools[%d].configs[%d]: web_search is not supported for %s by this server: it has no search backend (web_search is Anthropic's server tool, for Claude models only), so the tool cannot be enabled (set enabled: false, or leave it out)", i, j, modelID)
			}
		}
	}
	return nil
}
