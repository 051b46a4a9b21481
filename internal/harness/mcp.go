package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/reinsdev/reins/internal/model"
	ma "github.com/reinsdev/reins/managedagents"
)

// MCPHost reaches the remote MCP servers of a session's agent (the
// connector, with the session's vault credentials).
type MCPHost interface {
	// Tools lists the tools of the agent's MCP servers, connecting as
	// needed. A connection-level failure is an *MCPError.
	Tools(ctx context.Context, sess *ma.Session) ([]MCPTool, error)
	// Call calls a tool. A tool that fails is a result with IsError; a
	// connection-level failure is an *MCPError.
	Call(ctx context.Context, sess *ma.Session, server, tool string, input json.RawMessage) (ToolResult, error)
	// Release closes the session's connections (the runner leaves).
	Release(sessionID string)
}

// MCPTool is a tool of an MCP server as offered to the model.
type MCPTool struct {
	// Name is the model-facing name (unique, [A-Za-z0-9_-]{1,128}).
	Name string
	// Server is the agent's name for the server; Tool the server's name
	// for the tool.
	Server, Tool string
	Description  string
	InputSchema  json.RawMessage
}

// MCPError is a connection-level failure of an MCP server, reported as a
// session.error.
type MCPError struct {
	// Type is mcp_connection_failed_error or
	// mcp_authentication_failed_error.
	Type      string
	Server    string
	Message   string
	Retryable bool
	Err       error
}

func (e *MCPError) Error() string { return fmt.Sprintf("MCP server %s: %s", e.Server, e.Message) }

// Unwrap returns the underlying error.
func (e *MCPError) Unwrap() error { return e.Err }

// mcpPlanned is an MCP tool the plan offers.
type mcpPlanned struct {
	server, tool, policy string
}

// planMCP adds the enabled tools of the agent's MCP toolsets to the plan.
func planMCP(p *toolPlan, agent *ma.SessionAgent, tools []MCPTool) {
	toolsets := map[string]ma.Tool{}
	for _, t := range agent.Tools {
		if t.Type == ma.ToolTypeMCPToolset {
			toolsets[t.MCPServerName] = t
		}
	}
	for _, t := range tools {
		ts, ok := toolsets[t.Server]
		if !ok {
			continue
		}
		c := ResolveToolConfig(ts, t.Tool)
		if !c.Enabled {
			continue
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		p.offered = append(p.offered, model.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
		p.mcp[t.Name] = mcpPlanned{server: t.Server, tool: t.Tool, policy: c.PermissionPolicy.Type}
	}
}

func hasMCPToolsets(agent *ma.SessionAgent) bool {
	for _, t := range agent.Tools {
		if t.Type == ma.ToolTypeMCPToolset {
			return true
		}
	}
	return false
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// mcpToolName is the model-facing name of a server's tool as the
// transcript shows it.
func mcpToolName(server, tool string) string {
	n := unsafeName.ReplaceAllString("mcp__"+server+"__"+tool, "_")
	if len(n) > 128 {
		n = n[:128]
	}
	return n
}

// mcpFailure turns an MCP error into the session error policy.
func mcpFailure(err error) (failure, bool) {
	var me *MCPError
	if !errors.As(err, &me) {
		return failure{}, false
	}
	return failure{errType: me.Type, message: me.Message, retryable: me.Retryable, mcpServer: me.Server}, true
}
