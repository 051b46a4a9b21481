package harness

import (
	"testing"

	"github.com/reinsdev/reins/internal/model"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// TestTranscriptAnswersEveryToolUse: after every entry of these logs (tool
// confirmations, pull workers, custom and MCP tools, tool uses a new
// message or the turn's end abandons, a compaction that hides a tool use
// still waiting), the projected transcript answers a tool_use only once
// and only after it, and once the turn is over every tool_use has its
// tool_result, as the Messages API requires.
func TestTranscriptAnswersEveryToolUse(t *testing.T) {
	now := "2026-01-01T00:00:00Z"
	processed := func(ev ma.Event) ma.Event { ev.ProcessedAt = &now; return ev }
	requires := func(id string, ids ...string) ma.Event {
		return ma.Event{ID: id, Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRequiresAction, EventIDs: ids}}
	}
	endTurn := ma.Event{ID: "end", Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopEndTurn}}
	msg := ma.Event{ID: "m1", Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "go"}}}
	running := ma.Event{ID: "r1", Type: ma.EventStatusRunning}
	logs := map[string][]ma.Event{
		"confirmations": {msg, processed(msg), running,
			{ID: "c1", Type: ma.EventAgentCustomToolUse},
			{ID: "a1", Type: ma.EventAgentToolUse, EvaluatedPermission: "ask"},
			{ID: "a2", Type: ma.EventAgentToolUse, EvaluatedPermission: "ask"},
			requires("i1", "c1", "a1", "a2"),
			processed(ma.Event{ID: "x1", Type: ma.EventUserToolConfirmation, ToolUseID: "a1", Result: "deny"}),
			processed(ma.Event{ID: "x2", Type: ma.EventUserToolConfirmation, ToolUseID: "a2", Result: "allow"}),
			processed(ma.Event{ID: "x3", Type: ma.EventUserCustomToolResult, CustomToolUseID: "c1"}),
			{ID: "t2", Type: ma.EventAgentToolResult, ToolUseID: "a2"},
			endTurn},
		"pull workers": {processed(msg), running,
			{ID: "b1", Type: ma.EventAgentToolUse, EvaluatedPermission: "allow", Name: "bash"},
			{ID: "w1", Type: ma.EventAgentToolUse, EvaluatedPermission: "allow", Name: toolset.WebFetch},
			{ID: "b2", Type: ma.EventAgentToolUse, EvaluatedPermission: "ask", Name: "bash"},
			{ID: "b3", Type: ma.EventAgentToolUse, EvaluatedPermission: "deny", Name: "bash"},
			requires("i1", "b1", "b2"),
			processed(ma.Event{ID: "x1", Type: ma.EventUserToolResult, ToolUseID: "b1"}),
			processed(ma.Event{ID: "x2", Type: ma.EventUserToolConfirmation, ToolUseID: "b2", Result: "allow"}),
			processed(ma.Event{ID: "x3", Type: ma.EventUserToolResult, ToolUseID: "b2"}),
			endTurn},
		"abandoned": {processed(msg), running,
			{ID: "c1", Type: ma.EventAgentCustomToolUse},
			{ID: "p1", Type: ma.EventAgentMCPToolUse, EvaluatedPermission: "ask"},
			{ID: "s1", Type: ma.EventAgentToolUse, ServerBlock: ma.Raw(`{"type":"server_tool_use"}`)},
			requires("i1", "c1", "p1"),
			processed(ma.Event{ID: "m2", Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "instead"}}}),
			{ID: "r2", Type: ma.EventStatusRunning},
			{ID: "p2", Type: ma.EventAgentMCPToolUse, EvaluatedPermission: "allow"},
			{ID: "q2", Type: ma.EventAgentMCPToolResult, MCPToolUseID: "p2"},
			{ID: "c3", Type: ma.EventAgentCustomToolUse},
			endTurn,
			// A late answer to an abandoned tool use adds nothing.
			processed(ma.Event{ID: "x9", Type: ma.EventUserCustomToolResult, CustomToolUseID: "c3"})},
		"compacted while waiting": {processed(msg), running,
			{ID: "c1", Type: ma.EventAgentCustomToolUse},
			requires("i1", "c1"),
			processed(ma.Event{ID: "m2", Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "instead"}}}),
			{ID: "r2", Type: ma.EventStatusRunning},
			{ID: "k1", Type: ma.EventAgentContextCompacted, CompactedThrough: "i1", Content: []ma.ContentBlock{{Type: "text", Text: "summary"}}},
			{ID: "a2", Type: ma.EventAgentToolUse, EvaluatedPermission: "allow", Name: "bash"},
			{ID: "t2", Type: ma.EventAgentToolResult, ToolUseID: "a2"},
			endTurn},
	}
	for name, log := range logs {
		for _, client := range []bool{false, true} {
			for i := range log {
				v := projectAll(log[:i+1], client).view()
				over := log[i].ID == "end" || log[i].ID == "x9"
				if err := checkPairs(v.messages, over); err != "" {
					t.Fatalf("%s (client %v) after %s: %s", name, client, log[i].ID, err)
				}
				if over && (v.turnActive() || len(v.awaitingIDs()) > 0 || len(v.runnable()) > 0) {
					t.Fatalf("%s (client %v): the turn is over, yet active %v, awaiting %v, runnable %d",
						name, client, v.turnActive(), v.awaitingIDs(), len(v.runnable()))
				}
			}
		}
	}
}

// checkPairs returns what is wrong with the tool_use and tool_result
// blocks of a transcript, or "". complete: every tool_use must have its
// result.
func checkPairs(msgs []model.Message, complete bool) string {
	used, answered := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case model.BlockToolUse:
				used[b.ID] = true
			case model.BlockToolResult:
				switch {
				case !used[b.ToolUseID]:
					return "a tool_result for " + b.ToolUseID + " without its tool_use before it"
				case answered[b.ToolUseID]:
					return "two tool_results for " + b.ToolUseID
				}
				answered[b.ToolUseID] = true
			}
		}
	}
	for id := range used {
		if complete && !answered[id] {
			return "no tool_result for " + id
		}
	}
	return ""
}
