package awaiting

import (
	"maps"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

func TestFold(t *testing.T) {
	now := "2026-01-01T00:00:00Z"
	msg := ma.Event{ID: "m1", Type: ma.EventUserMessage}
	processed := msg
	processed.ProcessedAt = &now
	log := []ma.Event{
		msg, // queued; its processed echo below counts
		processed,
		{ID: "r1", Type: ma.EventStatusRunning},
		{ID: "c1", Type: ma.EventAgentCustomToolUse},
		{ID: "a1", Type: ma.EventAgentToolUse, EvaluatedPermission: "ask"},
		{ID: "a2", Type: ma.EventAgentToolUse, EvaluatedPermission: "ask"},
		{ID: "i1", Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRequiresAction, EventIDs: []string{"c1", "a1", "a2"}}},
	}
	f := NewFold(false)
	for _, ev := range log {
		f.Feed(ev)
	}
	a := f.Actions()
	if !a.TurnActive || !maps.Equal(a.Confirm, map[string]bool{"a1": true, "a2": true}) || !maps.Equal(a.CustomResults, map[string]bool{"c1": true}) {
		t.Fatalf("actions %+v", a)
	}

	// A clone goes its own way.
	c := f.Clone()
	c.Feed(ma.Event{ID: "x1", Type: ma.EventUserToolConfirmation, ToolUseID: "a1", Result: "deny", ProcessedAt: &now})
	c.Feed(ma.Event{ID: "x2", Type: ma.EventUserCustomToolResult, CustomToolUseID: "c1", ProcessedAt: &now})
	if got := c.Actions(); len(got.CustomResults) != 0 || !maps.Equal(got.Confirm, map[string]bool{"a2": true}) {
		t.Fatalf("clone after answers: %+v", got)
	}
	if got := f.Actions(); !maps.Equal(got.Confirm, a.Confirm) || !maps.Equal(got.CustomResults, a.CustomResults) {
		t.Fatalf("the original changed with its clone: %+v", got)
	}
	// Settled tool uses are forgotten.
	if n := len(c.uses); n != 1 {
		t.Fatalf("clone keeps %d tool uses, want 1", n)
	}

	// A new user message abandons what is left, as the projection does.
	c.Feed(ma.Event{ID: "m2", Type: ma.EventUserMessage, ProcessedAt: &now})
	if got := c.Actions(); len(got.Confirm) != 0 || len(c.uses) != 0 {
		t.Fatalf("after a new message: %+v", got)
	}
	all := append(log, ma.Event{ID: "m2", Type: ma.EventUserMessage, ProcessedAt: &now})
	if want := Of(all[1:], false); len(want.Confirm) != 0 || len(want.CustomResults) != 0 {
		t.Fatalf("the fold of the whole log disagrees: %+v", want)
	}
}
