package agents

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

func ptr[T any](v T) *T { return &v }

var (
	docs   = ma.MCPServer{Type: "url", Name: "docs", URL: "https://docs.example/mcp"}
	agent  = ToolParam{Type: ma.ToolTypeAgentToolset}
	docsTS = ToolParam{Type: ma.ToolTypeMCPToolset, MCPServerName: "docs"}
	lookup = ToolParam{Type: ma.ToolTypeCustom, Name: "lookup", Description: "Look a word up", InputSchema: json.RawMessage(`{"type":"object"}`)}
)

// wantRule checks that err is an *Error of kind with a message holding
// want.
func wantRule(t *testing.T, err error, kind Kind, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want an *agents.Error", err, err)
	}
	if e.Kind != kind || !strings.Contains(e.Message, want) {
		t.Fatalf("error %d %q, want %d containing %q", e.Kind, e.Message, kind, want)
	}
}

func TestResolveToolsRefuses(t *testing.T) {
	many := make([]ToolParam, MaxTools+1)
	servers := make([]ma.MCPServer, MaxMCPServers+1)
	for i := range many {
		many[i] = ToolParam{Type: ma.ToolTypeCustom}
	}
	for i := range servers {
		servers[i] = docs
	}
	custom := func(edit func(*ToolParam)) ToolParam {
		p := lookup
		edit(&p)
		return p
	}
	for _, tc := range []struct {
		name    string
		tools   []ToolParam
		servers []ma.MCPServer
		want    string
	}{
		{"too many tools", many, nil, "tools: at most 128 tools, got 129"},
		{"too many servers", nil, servers, "mcp_servers: at most 20 servers, got 21"},
		{"server type", nil, []ma.MCPServer{{Type: "stdio", Name: "x", URL: "https://x"}}, `mcp_servers[0].type: must be "url"; got "stdio"`},
		{"server name", nil, []ma.MCPServer{{Type: "url", URL: "https://x"}}, "mcp_servers[0].name: required"},
		{"server name twice", []ToolParam{docsTS}, []ma.MCPServer{docs, docs}, `mcp_servers[1].name: duplicate server name "docs"`},
		{"server url", nil, []ma.MCPServer{{Type: "url", Name: "x", URL: "ftp://x"}}, `mcp_servers[0].url: must be an http(s) URL; got "ftp://x"`},
		{"server unreferenced", nil, []ma.MCPServer{docs}, `mcp_servers: server "docs" is not referenced by any mcp_toolset in tools`},
		{"no type", []ToolParam{{}}, nil, "tools[0].type: required"},
		{"unknown type", []ToolParam{{Type: "bash"}}, nil, `tools[0].type: unknown tool type "bash"`},
		{"no such server", []ToolParam{docsTS}, nil, `tools[0].mcp_server_name: no MCP server named "docs" in mcp_servers`},
		{"server twice", []ToolParam{docsTS, docsTS}, []ma.MCPServer{docs}, `tools[1].mcp_server_name: server "docs" is referenced by two toolsets`},
		{"two agent toolsets", []ToolParam{agent, agent}, nil, "tools[1]: only one agent_toolset_20260401 is allowed"},
		{"default policy", []ToolParam{{Type: ma.ToolTypeAgentToolset, DefaultConfig: &ToolConfigParam{PermissionPolicy: &ma.PermissionPolicy{Type: "never"}}}}, nil,
			`tools[0].default_config.permission_policy.type: must be always_allow, always_ask or auto; got "never"`},
		{"config name", []ToolParam{{Type: ma.ToolTypeAgentToolset, Configs: []ToolConfigParam{{}}}}, nil, "tools[0].configs[0].name: required"},
		{"config unknown tool", []ToolParam{{Type: ma.ToolTypeAgentToolset, Configs: []ToolConfigParam{{Name: "telnet"}}}}, nil, `tools[0].configs[0].name: unknown tool "telnet" (known: `},
		{"config twice", []ToolParam{{Type: ma.ToolTypeAgentToolset, Configs: []ToolConfigParam{{Name: "bash"}, {Name: "bash"}}}}, nil, `tools[0].configs[1].name: duplicate config for "bash"`},
		{"config policy", []ToolParam{{Type: ma.ToolTypeMCPToolset, MCPServerName: "docs", Configs: []ToolConfigParam{{Name: "search", PermissionPolicy: &ma.PermissionPolicy{}}}}}, []ma.MCPServer{docs},
			`tools[0].configs[0].permission_policy.type: must be always_allow, always_ask or auto; got ""`},
		{"custom name", []ToolParam{custom(func(p *ToolParam) { p.Name = "a b" })}, nil, `tools[0].name: must be 1 to 128 characters of letters, digits, _ and -; got "a b"`},
		{"custom name twice", []ToolParam{lookup, lookup}, nil, `tools[1].name: tool name "lookup" is used twice`},
		{"custom name of a built-in", []ToolParam{custom(func(p *ToolParam) { p.Name = "bash" }), agent}, nil, `tools[1]: tool name "bash" is used twice`},
		{"custom description", []ToolParam{custom(func(p *ToolParam) { p.Description = "" })}, nil, "tools[0].description: required"},
		{"custom schema", []ToolParam{custom(func(p *ToolParam) { p.InputSchema = json.RawMessage(`{"type":"string"}`) })}, nil,
			`tools[0].input_schema: must be a JSON Schema object with "type": "object"`},
		{"custom no schema", []ToolParam{custom(func(p *ToolParam) { p.InputSchema = nil })}, nil, "tools[0].input_schema: must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools, err := ResolveTools(tc.tools, tc.servers)
			if tools != nil {
				t.Errorf("tools %v with an error", tools)
			}
			wantRule(t, err, Invalid, tc.want)
		})
	}
}

func TestResolveToolsFillsDefaults(t *testing.T) {
	allow, ask := &ma.PermissionPolicy{Type: ma.PolicyAlwaysAllow}, &ma.PermissionPolicy{Type: ma.PolicyAlwaysAsk}
	params := []ToolParam{
		{Type: ma.ToolTypeAgentToolset, DefaultConfig: &ToolConfigParam{Name: "ignored", Enabled: ptr(false)},
			Configs: []ToolConfigParam{{Name: "bash", Enabled: ptr(true)}, {Name: "read", PermissionPolicy: ask}}},
		docsTS,
		lookup,
	}
	got, err := ResolveTools(params, []ma.MCPServer{docs})
	if err != nil {
		t.Fatal(err)
	}
	want := []ma.Tool{
		{Type: ma.ToolTypeAgentToolset, DefaultConfig: &ma.ToolConfig{Enabled: false, PermissionPolicy: allow},
			Configs: []ma.ToolConfig{{Name: "bash", Enabled: true, PermissionPolicy: allow}, {Name: "read", Enabled: false, PermissionPolicy: ask}}},
		{Type: ma.ToolTypeMCPToolset, MCPServerName: "docs", DefaultConfig: &ma.ToolConfig{Enabled: true, PermissionPolicy: ask}, Configs: []ma.ToolConfig{}},
		{Type: ma.ToolTypeCustom, Name: "lookup", Description: "Look a word up", InputSchema: lookup.InputSchema},
	}
	if !reflect.DeepEqual(got, want) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		t.Fatalf("resolved\n%s\nwant\n%s", a, b)
	}
	// Resolved tools given again resolve to themselves.
	again, err := ResolveTools(ToolParams(got), []ma.MCPServer{docs})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, got) {
		t.Fatalf("resolved again %+v, want %+v", again, got)
	}
	if none, err := ResolveTools(nil, nil); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("no tools: %v, %v; want [], nil", none, err)
	}
}

func TestCheckWebTools(t *testing.T) {
	toolsWith := func(name, policy string, enabled bool) []ma.Tool {
		return []ma.Tool{{Type: ma.ToolTypeCustom, Name: "lookup"}, {Type: ma.ToolTypeAgentToolset, Configs: []ma.ToolConfig{
			{Name: "bash", Enabled: true, PermissionPolicy: &ma.PermissionPolicy{Type: ma.PolicyAlwaysAsk}},
			{Name: name, Enabled: enabled, PermissionPolicy: &ma.PermissionPolicy{Type: policy}}}}}
	}
	for _, tc := range []struct {
		model, tool, policy string
		enabled             bool
		want                string // "" allowed
	}{
		{"claude-sonnet-4-5", toolset.WebSearch, ma.PolicyAlwaysAllow, true, ""},
		{"claude-sonnet-4-5", toolset.WebFetch, ma.PolicyAlwaysAsk, true, "tools[1].configs[1]: web_fetch for Claude models is Anthropic's server tool"},
		{"claude-sonnet-4-5", toolset.WebSearch, ma.PolicyAuto, true, "its permission_policy must be always_allow (got auto)"},
		{"claude-sonnet-4-5", toolset.WebSearch, ma.PolicyAlwaysAsk, false, ""},
		{"gpt-5", toolset.WebSearch, ma.PolicyAlwaysAllow, true, "tools[1].configs[1]: web_search is not supported for gpt-5 by this server"},
		{"gpt-5", toolset.WebSearch, ma.PolicyAlwaysAllow, false, ""},
		{"gpt-5", toolset.WebFetch, ma.PolicyAlwaysAsk, true, ""},
	} {
		err := CheckWebTools(tc.model, toolsWith(tc.tool, tc.policy, tc.enabled))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s %s %s enabled=%v: %v", tc.model, tc.tool, tc.policy, tc.enabled, err)
			}
			continue
		}
		wantRule(t, err, Invalid, tc.want)
	}
}

func TestCheckModel(t *testing.T) {
	for _, tc := range []struct {
		m    ma.ModelConfig
		want string
	}{
		{ma.ModelConfig{ID: "claude-sonnet-4-5"}, ""},
		{ma.ModelConfig{ID: "m", Effort: &ma.Effort{Type: "xhigh"}, Speed: "fast"}, ""},
		{ma.ModelConfig{}, "model: required"},
		{ma.ModelConfig{ID: strings.Repeat("m", 257)}, "model: id longer than 256 characters"},
		{ma.ModelConfig{ID: "m", Effort: &ma.Effort{Type: "huge"}}, `model.effort: must be one of low, medium, high, xhigh, max; got "huge"`},
		{ma.ModelConfig{ID: "m", Speed: "slow"}, `model.speed: must be standard or fast; got "slow"`},
	} {
		err := CheckModel(tc.m)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.m, err)
			}
			continue
		}
		wantRule(t, err, Invalid, tc.want)
	}
}
