package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// BuiltinTools returns the built-in tools the agent has enabled.
func BuiltinTools(agent *ma.SessionAgent) []string {
	p := planTools(agent)
	var out []string
	for _, name := range toolset.Names() {
		if p.builtin[name] != "" {
			out = append(out, name)
		}
	}
	return out
}

// noTools answers every call with an error result: the server has no way to
// run built-in tools for this session.
type noTools struct{}

func (noTools) RunTool(_ context.Context, sess *ma.Session, call tool.Call) tool.Result {
	return tool.ErrorResult(fmt.Sprintf("The tool %s could not run: no executor serves environment %s.", call.Name, sess.EnvironmentID))
}

// noWebFetch answers web_fetch calls when the server has no fetcher.
type noWebFetch struct{}

func (noWebFetch) RunTool(context.Context, *ma.Session, tool.Call) tool.Result {
	return tool.ErrorResult("The tool web_fetch could not run: this server does not run web_fetch.")
}

// toolPlan is the resolved tool configuration of a session's agent.
type toolPlan struct {
	offered []model.Tool
	// kind and policy of each offered name.
	builtin map[string]string // name -> policy
	custom  map[string]bool
	mcp     map[string]mcpPlanned // model-facing name -> server tool
}

func planTools(agent *ma.SessionAgent) *toolPlan {
	p := &toolPlan{builtin: map[string]string{}, custom: map[string]bool{}, mcp: map[string]mcpPlanned{}}
	for _, t := range agent.Tools {
		switch t.Type {
		case ma.ToolTypeAgentToolset:
			for _, b := range toolset.Builtins() {
				c := ResolveToolConfig(t, b.Name)
				if !c.Enabled {
					continue
				}
				p.offered = append(p.offered, model.Tool{Name: b.Name, Description: b.Description, InputSchema: b.InputSchema})
				p.builtin[b.Name] = c.PermissionPolicy.Type
			}
			// The web tools are offered only when a per-tool config
			// enables them: the toolset default does not. For Claude
			// models they are Anthropic's server tools; for others
			// reins runs web_fetch itself.
			if ServerWebTools(agent.Model.ID) {
				for _, w := range []struct{ name, server string }{{toolset.WebSearch, anthropic.WebSearchTool}, {toolset.WebFetch, anthropic.WebFetchTool}} {
					if c, ok := webToolConfig(t, w.name); ok && c.Enabled {
						p.offered = append(p.offered, model.Tool{Name: w.name, Server: w.server})
					}
				}
			} else if c, ok := webToolConfig(t, toolset.WebFetch); ok && c.Enabled {
				w := toolset.WebFetchTool()
				p.offered = append(p.offered, model.Tool{Name: w.Name, Description: w.Description, InputSchema: w.InputSchema})
				p.builtin[w.Name] = c.PermissionPolicy.Type
			}
		case ma.ToolTypeCustom:
			schema := t.InputSchema
			if len(schema) == 0 {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			p.offered = append(p.offered, model.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
			p.custom[t.Name] = true
		}
	}
	return p
}

// webToolConfig returns the effective configuration of a web tool of an
// agent toolset, and whether the toolset has a config for it.
func webToolConfig(t ma.Tool, name string) (ma.ToolConfig, bool) {
	for _, c := range t.Configs {
		if c.Name == name {
			return ResolveToolConfig(t, name), true
		}
	}
	return ma.ToolConfig{}, false
}

// ServerWebTools reports whether the web tools of an agent with this model
// are Anthropic's server tools (Claude models: the Messages API runs them)
// rather than tools reins runs.
func ServerWebTools(modelID string) bool {
	return strings.HasPrefix(modelID, "claude-")
}

// ResolveToolConfig returns the effective configuration of the named tool
// in a toolset (name "" = the toolset default): the per-tool value, else the
// toolset default, else the protocol default (enabled; always_allow for the
// agent toolset, always_ask for MCP toolsets).
func ResolveToolConfig(t ma.Tool, name string) ma.ToolConfig {
	policy := ma.PolicyAlwaysAllow
	if t.Type == ma.ToolTypeMCPToolset {
		policy = ma.PolicyAlwaysAsk
	}
	out := ma.ToolConfig{Name: name, Enabled: true, PermissionPolicy: &ma.PermissionPolicy{Type: policy}}
	apply := func(c *ma.ToolConfig) {
		if c == nil {
			return
		}
		out.Enabled = c.Enabled
		if c.PermissionPolicy != nil && c.PermissionPolicy.Type != "" {
			out.PermissionPolicy = &ma.PermissionPolicy{Type: c.PermissionPolicy.Type}
		}
	}
	apply(t.DefaultConfig)
	if name != "" {
		for i := range t.Configs {
			if t.Configs[i].Name == name {
				apply(&t.Configs[i])
			}
		}
	}
	return out
}
