package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// ToolCall is a built-in tool call the harness dispatches.
type ToolCall struct {
	// ID is the id of the agent.tool_use event.
	ID    string
	Name  string
	Input json.RawMessage
}

// ToolResult is the outcome of a tool call.
type ToolResult struct {
	Content []ma.ContentBlock
	IsError bool
}

// ToolRunner runs built-in tools (bash, read, write, edit, glob, grep) for a
// session. The executor hub implements it; a ToolRunner must return when ctx
// is cancelled.
type ToolRunner interface {
	RunTool(ctx context.Context, sess *ma.Session, call ToolCall) ToolResult
}

// Placer is implemented by a ToolRunner that must place a session on a
// machine before its tools can run (the executor hub).
type Placer interface {
	// Place readies the session's tools. It returns nil when they can run
	// now; otherwise a Wait (the session waits in "rescheduling"). An
	// error means the tools cannot run: each call then gets an error
	// result.
	Place(ctx context.Context, sess *ma.Session) (*Wait, error)
	// Release frees what Place took for the session; the runner calls it
	// when it leaves.
	Release(sessionID string)
	// Idle tells that the session went idle: what Place took may be handed
	// to another session until the next Place.
	Idle(sessionID string)
}

// Wait says that a session's tools cannot be placed yet.
type Wait struct {
	// C is closed when placement may have become possible.
	C <-chan struct{}
	// Reason tells the user why the session waits; it is the reason of
	// its session.status_rescheduled event.
	Reason string
}

// WorkerHost is the link to pull workers (the work queue of self-hosted
// environments): sessions they serve get their built-in tools run by the
// worker, which answers each agent.tool_use with a user.tool_result.
type WorkerHost interface {
	// Serving reports whether pull workers serve the session (client) and
	// whether one holds it now (present).
	Serving(ctx context.Context, sess *ma.Session) (client, present bool, err error)
	// NeedWorker asks for a worker for the session (enqueues work).
	NeedWorker(ctx context.Context, sess *ma.Session) error
	// SessionIdle tells that the session went idle with nothing for a
	// worker to do: work queued for it retires.
	SessionIdle(ctx context.Context, sess *ma.Session) error
}

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

func (noTools) RunTool(_ context.Context, sess *ma.Session, call ToolCall) ToolResult {
	return ErrorResult(fmt.Sprintf("The tool %s could not run: no executor serves environment %s.", call.Name, sess.EnvironmentID))
}

// noWebFetch answers web_fetch calls when the server has no fetcher.
type noWebFetch struct{}

func (noWebFetch) RunTool(context.Context, *ma.Session, ToolCall) ToolResult {
	return ErrorResult("The tool web_fetch could not run: this server does not run web_fetch.")
}

// ErrorResult is an error tool result with one text block.
func ErrorResult(text string) ToolResult {
	return ToolResult{IsError: true, Content: []ma.ContentBlock{{Type: "text", Text: text}}}
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
