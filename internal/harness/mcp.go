package harness

import (
	"encoding/json"
	"errors"
	"regexp"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// mcpPlanned is an MCP tool the plan offers.
type mcpPlanned struct {
	server, tool, policy string
}

// planMCP adds the enabled tools of the agent's MCP toolsets to the plan.
func planMCP(p *toolPlan, agent *ma.SessionAgent, tools []tool.MCPTool) {
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
	var me *tool.MCPError
	if !errors.As(err, &me) {
		return failure{}, false
	}
	return failure{errType: me.Type, message: me.Message, retryable: me.Retryable, mcpServer: me.Server}, true
}
