package harness

import (
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

// TestWebFetchNotForWorkers: in a session pull workers serve, built-in
// tool uses wait for the worker, except web_fetch, which the server runs.
func TestWebFetchNotForWorkers(t *testing.T) {
	events := []ma.Event{
		{Type: ma.EventUserMessage, ID: "m", Content: []ma.ContentBlock{{Type: "text", Text: "go"}}},
		{Type: ma.EventAgentToolUse, ID: "b", Name: "bash", EvaluatedPermission: "allow"},
		{Type: ma.EventAgentToolUse, ID: "w", Name: "web_fetch", EvaluatedPermission: "allow"},
	}
	v := projectAll(events, true).view()
	if aw := v.awaitingIDs(); len(aw) != 1 || aw[0] != "b" {
		t.Fatalf("awaiting the worker: %v, want [b]", aw)
	}
	rn := v.runnable()
	if len(rn) != 1 || rn[0].Event.ID != "w" {
		t.Fatalf("runnable here: %d uses", len(rn))
	}
}
