package managedagents

import "encoding/json"

// ModelConfig is an agent's model. The API accepts a bare string or an
// object; responses always use the object form.
type ModelConfig struct {
	ID           string  `json:"id"`
	Effort       *Effort `json:"effort"`
	Speed        string  `json:"speed,omitempty"`
	InferenceGeo string  `json:"inference_geo,omitempty"`
}

// Effort is the reasoning effort level ({"type":"high"}).
type Effort struct {
	Type string `json:"type"`
}

// PermissionPolicy is {"type":"always_allow"}, {"type":"always_ask"} or
// {"type":"auto"}.
type PermissionPolicy struct {
	Type string `json:"type"`
}

// Permission policy types.
const (
	PolicyAlwaysAllow = "always_allow"
	PolicyAlwaysAsk   = "always_ask"
	// PolicyAuto lets the server judge each call. reins has no judge, so
	// every call is one it "cannot reach a judgement on" and evaluates to
	// ask, as the API documents for that case.
	PolicyAuto = "auto"
)

// ToolEvaluation is the evaluation of an agent.tool_use or
// agent.mcp_tool_use: {"type":"always_allow"}, {"type":"always_ask"}, or
// {"type":"auto","evaluated_permission":{...}} with the judgement of the
// auto policy.
type ToolEvaluation struct {
	Type                string          `json:"type"`
	EvaluatedPermission *AutoPermission `json:"evaluated_permission,omitempty"`
}

// AutoPermission is the auto policy's judgement of one call:
// {"type":"allow"}, or {"type":"ask"|"deny","reason_code":...}.
type AutoPermission struct {
	Type       string `json:"type"`
	ReasonCode string `json:"reason_code,omitempty"`
}

// ReasonIndeterminate is the reason code of an auto judgement that
// reached no verdict: the only one reins gives, as it has no classifier.
const ReasonIndeterminate = "indeterminate"

// Evaluate returns the evaluated permission ("allow" or "ask") of a call
// under a resolved permission policy, and the evaluation that says so.
// reins judges no call, so auto asks with reason indeterminate; an
// unknown policy is treated as auto.
func Evaluate(policy string) (permission string, eval *ToolEvaluation) {
	switch policy {
	case PolicyAlwaysAllow:
		return "allow", &ToolEvaluation{Type: PolicyAlwaysAllow}
	case PolicyAlwaysAsk:
		return "ask", &ToolEvaluation{Type: PolicyAlwaysAsk}
	}
	return "ask", &ToolEvaluation{Type: PolicyAuto, EvaluatedPermission: &AutoPermission{Type: "ask", ReasonCode: ReasonIndeterminate}}
}

// ToolConfig is the resolved configuration of one tool in a toolset.
type ToolConfig struct {
	Name             string            `json:"name,omitempty"`
	Enabled          bool              `json:"enabled"`
	PermissionPolicy *PermissionPolicy `json:"permission_policy"`
}

// Tool is one entry of an agent's tools: an agent toolset
// ("agent_toolset_20260401"), an MCP toolset ("mcp_toolset") or a custom
// tool ("custom").
type Tool struct {
	Type string `json:"type"`

	// Toolsets.
	MCPServerName string       `json:"mcp_server_name,omitempty"`
	DefaultConfig *ToolConfig  `json:"default_config,omitempty"`
	Configs       []ToolConfig `json:"configs,omitempty"`

	// Custom tools.
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	InputSchema Raw    `json:"input_schema,omitempty"`
}

// Tool types.
const (
	ToolTypeAgentToolset = "agent_toolset_20260401"
	ToolTypeMCPToolset   = "mcp_toolset"
	ToolTypeCustom       = "custom"
)

// MCPServer is an agent's remote MCP server.
type MCPServer struct {
	Type string `json:"type"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Agent is a version of an agent.
type Agent struct {
	ID                string      `json:"id"`
	Type              string      `json:"type"`
	Name              string      `json:"name"`
	Description       string      `json:"description"`
	System            string      `json:"system"`
	Model             ModelConfig `json:"model"`
	Tools             []Tool      `json:"tools"`
	MCPServers        []MCPServer `json:"mcp_servers"`
	Skills            []SkillRef  `json:"skills"`
	Multiagent        Raw         `json:"multiagent"`
	ExecutionIdentity Raw         `json:"execution_identity"`
	Metadata          Metadata    `json:"metadata"`
	Version           int64       `json:"version"`
	CreatedAt         string      `json:"created_at"`
	UpdatedAt         string      `json:"updated_at"`
	ArchivedAt        *string     `json:"archived_at"`
}

// SessionAgent is the agent snapshot a session runs with.
type SessionAgent struct {
	ID          string      `json:"id"`
	Type        string      `json:"type"`
	Name        string      `json:"name"`
	Description string      `json:"description"`
	System      string      `json:"system"`
	Model       ModelConfig `json:"model"`
	Tools       []Tool      `json:"tools"`
	MCPServers  []MCPServer `json:"mcp_servers"`
	Skills      []SkillRef  `json:"skills"`
	Multiagent  Raw         `json:"multiagent"`
	Version     int64       `json:"version"`
}

// MarshalJSON writes the fields of the tool's own type only, with toolset
// configs always present (resolved form).
func (t Tool) MarshalJSON() ([]byte, error) {
	switch t.Type {
	case ToolTypeCustom:
		return json.Marshal(struct {
			Type        string `json:"type"`
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema Raw    `json:"input_schema"`
		}{t.Type, t.Name, t.Description, t.InputSchema})
	default:
		configs := t.Configs
		if configs == nil {
			configs = []ToolConfig{}
		}
		return json.Marshal(struct {
			Type          string       `json:"type"`
			MCPServerName string       `json:"mcp_server_name,omitempty"`
			DefaultConfig *ToolConfig  `json:"default_config"`
			Configs       []ToolConfig `json:"configs"`
		}{t.Type, t.MCPServerName, t.DefaultConfig, configs})
	}
}

// ThreadAgent is the definition a session thread running this version of
// the agent runs with.
func (a Agent) ThreadAgent() ThreadAgent {
	return ThreadAgent{ID: a.ID, Type: ThreadAgentSaved, Name: a.Name, Description: a.Description, System: a.System, Model: a.Model,
		Tools: a.Tools, MCPServers: a.MCPServers, Skills: a.Skills, ExecutionIdentity: nullIfEmpty(a.ExecutionIdentity), Version: a.Version}
}

// ThreadAgent is the definition a session thread running the session's
// agent (its overrides applied) runs with.
func (a SessionAgent) ThreadAgent() ThreadAgent {
	return ThreadAgent{ID: a.ID, Type: ThreadAgentSaved, Name: a.Name, Description: a.Description, System: a.System, Model: a.Model,
		Tools: a.Tools, MCPServers: a.MCPServers, Skills: a.Skills, ExecutionIdentity: Raw("null"), Version: a.Version}
}

// nullIfEmpty is r, or null when r is empty.
func nullIfEmpty(r Raw) Raw {
	if len(r) == 0 {
		return Raw("null")
	}
	return r
}
