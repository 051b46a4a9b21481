package harness

import (
	"maps"
	"testing"

	"github.com/reinsdev/reins/internal/awaiting"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// actionsOf is what the runner's projection says the session waits for.
func actionsOf(v *view) awaiting.Actions {
	a := awaiting.Actions{Confirm: map[string]bool{}, CustomResults: map[string]bool{}, ToolResults: map[string]bool{}, TurnActive: v.turnActive}
	for _, u := range v.uses {
		switch {
		case !u.awaiting():
		case u.ev.Type == ma.EventAgentCustomToolUse:
			a.CustomResults[u.ev.ID] = true
		case u.awaitsClient():
			a.ToolResults[u.ev.ID] = true
		default:
			a.Confirm[u.ev.ID] = true
		}
	}
	return a
}

// TestProjectionAgreesWithAwaiting: the sessions service checks client
// input against awaiting.Fold, the runner acts on its projection; after
// every entry of these logs both say the session waits for the same
// things.
func TestProjectionAgreesWithAwaiting(t *testing.T) {
	now := "2026-01-01T00:00:00Z"
	processed := func(ev ma.Event) ma.Event { ev.ProcessedAt = &now; return ev }
	requires := func(id string, ids ...string) ma.Event {
		return ma.Event{ID: id, Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRequiresAction, EventIDs: ids}}
	}
	endTurn := ma.Event{ID: "end", Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopEndTurn}}
	msg := ma.Event{ID: "m1", Type: ma.EventUserMessage}
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
			processed(ma.Event{ID: "m2", Type: ma.EventUserMessage}),
			{ID: "r2", Type: ma.EventStatusRunning},
			{ID: "p2", Type: ma.EventAgentMCPToolUse, EvaluatedPermission: "allow"},
			{ID: "q2", Type: ma.EventAgentMCPToolResult, MCPToolUseID: "p2"},
			{ID: "c3", Type: ma.EventAgentCustomToolUse},
			{ID: "term", Type: ma.EventStatusTerminated}},
	}
	for name, log := range logs {
		for _, client := range []bool{false, true} {
			fold := awaiting.NewFold(client)
			for i, ev := range log {
				fold.Feed(ev)
				want := actionsOf(projectAll(log[:i+1], client).view())
				got := fold.Actions()
				if got.TurnActive != want.TurnActive || !maps.Equal(got.Confirm, want.Confirm) ||
					!maps.Equal(got.CustomResults, want.CustomResults) || !maps.Equal(got.ToolResults, want.ToolResults) {
					t.Fatalf("%s (client %v) after %s: fold %+v, projection %+v", name, client, ev.ID, got, want)
				}
			}
		}
	}
}
