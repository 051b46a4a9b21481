package toolhost

import (
	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// The executor hub speaks the executor protocol's types; the harness and
// the rest of the server speak package tool's. These two functions are
// the one place the server converts between them.

// hubCall is a tool call as the executor hub sends it.
func hubCall(c tool.Call) executor.ToolCall {
	return executor.ToolCall{ID: c.ID, Name: c.Name, Input: c.Input}
}

// toolResult is an executor's tool result as the harness takes it.
func toolResult(r executor.ToolResult) tool.Result {
	out := tool.Result{IsError: r.IsError}
	for _, b := range r.Content {
		out.Content = append(out.Content, ma.ContentBlock{Type: b.Type, Text: b.Text})
	}
	return out
}
