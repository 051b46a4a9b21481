package harness

import ma "github.com/reinsdev/reins/managedagents"

// Actions is what a session waits for from its client, as the log says.
type Actions struct {
	// Confirm holds the ids of always_ask tool uses awaiting a
	// user.tool_confirmation.
	Confirm map[string]bool
	// CustomResults holds the ids of agent.custom_tool_use events awaiting
	// a user.custom_tool_result.
	CustomResults map[string]bool
	// TurnActive reports a turn in progress (running, or idle waiting on
	// requires_action).
	TurnActive bool
}

// PendingActions folds a session's live events into what the session waits
// for. The HTTP API uses it to validate tool confirmations and results.
func PendingActions(events []ma.Event) Actions {
	v := project(events)
	a := Actions{Confirm: map[string]bool{}, CustomResults: map[string]bool{}, TurnActive: v.turnActive}
	for _, u := range v.uses {
		if !u.awaiting() {
			continue
		}
		if u.ev.Type == ma.EventAgentCustomToolUse {
			a.CustomResults[u.ev.ID] = true
		} else {
			a.Confirm[u.ev.ID] = true
		}
	}
	return a
}
