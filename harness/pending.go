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
	// ToolResults holds the ids of agent.tool_use events awaiting a pull
	// worker's user.tool_result.
	ToolResults map[string]bool
	// TurnActive reports a turn in progress (running, or idle waiting on
	// requires_action).
	TurnActive bool
}

// PendingActions folds a session's live events into what the session waits
// for. The HTTP API uses it to validate tool confirmations and results.
// client says whether pull workers run the session's built-in tools.
func PendingActions(events []ma.Event, client bool) Actions {
	v := project(events, client)
	a := Actions{Confirm: map[string]bool{}, CustomResults: map[string]bool{}, ToolResults: map[string]bool{}, TurnActive: v.turnActive}
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
