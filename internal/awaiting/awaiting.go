// Package awaiting folds a session's log into what the session waits for
// from its client: tool confirmations, custom tool results, pull workers'
// tool results, and whether a turn is in progress. It is a leaf: it knows
// the API's event types and nothing of the store, the harness or HTTP, so
// the sessions service (which checks client input against it) and the
// harness (whose projection follows the same rules, checked by its tests)
// both may use it.
package awaiting

import (
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

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

// use is a tool use the model asked for, as the log records it.
type use struct {
	ev ma.Event
	// clientRuns: a pull worker runs this built-in tool and answers with
	// user.tool_result.
	clientRuns bool
	decision   string // "", "allow" or "deny" (from user.tool_confirmation)
	resolved   bool   // a result exists
	abandoned  bool   // the turn ended before it resolved
}

// awaiting reports whether the tool use waits for the client: a custom tool
// without result, an always_ask tool without confirmation, or a tool a
// pull worker runs without result.
func (u *use) awaiting() bool {
	if u.resolved || u.abandoned {
		return false
	}
	switch {
	case u.ev.Type == ma.EventAgentCustomToolUse:
		return true
	case u.ev.EvaluatedPermission == "ask" && u.decision == "":
		return true
	default:
		return u.allowedOnClient()
	}
}

// allowedOnClient reports whether a pull worker may run the tool use.
func (u *use) allowedOnClient() bool {
	return u.clientRuns && (u.ev.EvaluatedPermission == "allow" || u.decision == "allow")
}

// Fold folds a session's log, entry by entry and in seq order, into what
// the session waits for, with the rules the harness's projection uses. It
// keeps only the tool uses that are not settled (resolved or abandoned),
// so it stays small however long the log grows, and it can be fed every
// entry including echoes: a queued client event counts at its processed
// echo. It is not safe for concurrent use; Clone it to try events out.
type Fold struct {
	client     bool
	uses       []*use          // unsettled, in the order the model asked
	byID       map[string]*use // uses by event id
	turnActive bool
	// open: tool uses of the current model response(s) that a new user
	// message or the turn's end abandons.
	open []*use
}

// NewFold returns the fold of an empty log. client says whether pull
// workers run the session's built-in tools.
func NewFold(client bool) *Fold {
	return &Fold{client: client, byID: make(map[string]*use)}
}

// Client reports the client mode the fold was built with.
func (f *Fold) Client() bool { return f.client }

// Feed folds the next log entry's event. A queued client event is skipped;
// its processed echo, later in the log, counts where it is.
func (f *Fold) Feed(ev ma.Event) {
	switch ev.Type {
	case ma.EventUserMessage, ma.EventSystemMessage:
		if ev.ProcessedAt != nil {
			f.abandonOpen()
		}
	case ma.EventAgentToolUse, ma.EventAgentToolResult:
		switch {
		case len(ev.ServerBlock) > 0:
			// A tool the model's API ran: nothing here awaits it.
		case ev.Type == ma.EventAgentToolResult:
			f.result(ev.ToolUseID)
		default:
			f.use(ev)
		}
	case ma.EventAgentCustomToolUse, ma.EventAgentMCPToolUse:
		f.use(ev)
	case ma.EventUserToolConfirmation:
		if u := f.byID[ev.ToolUseID]; u != nil && u.decision == "" {
			u.decision = ev.Result
			u.resolved = ev.Result == "deny"
		}
	case ma.EventUserCustomToolResult, ma.EventUserToolResult, ma.EventAgentMCPToolResult:
		f.result(firstNonEmpty(ev.ToolUseID, ev.CustomToolUseID, ev.MCPToolUseID))
	case ma.EventStatusRunning:
		f.turnActive = true
	case ma.EventStatusIdle:
		if ev.StopReason == nil || ev.StopReason.Type != ma.StopRequiresAction {
			f.turnActive = false
			f.abandonOpen()
		}
	case ma.EventStatusTerminated:
		f.turnActive = false
	}
	f.prune()
}

// use folds a tool use.
func (f *Fold) use(ev ma.Event) {
	u := &use{ev: ev, clientRuns: f.client && ev.Type == ma.EventAgentToolUse && ev.EvaluatedPermission != "deny" && ev.Name != toolset.WebFetch}
	f.uses = append(f.uses, u)
	f.byID[ev.ID] = u
	f.open = append(f.open, u)
}

// result folds the result of the tool use with that id.
func (f *Fold) result(id string) {
	if u := f.byID[id]; u != nil {
		u.resolved = true
	}
}

// abandonOpen abandons the open tool uses without a result: a new user
// message or the end of the turn leaves them unanswered for good.
func (f *Fold) abandonOpen() {
	for _, u := range f.open {
		if !u.resolved {
			u.abandoned = true
		}
	}
	f.open = nil
}

// prune forgets settled tool uses: nothing later makes them await again.
func (f *Fold) prune() {
	keep := f.uses[:0]
	for _, u := range f.uses {
		if u.resolved || u.abandoned {
			delete(f.byID, u.ev.ID)
			continue
		}
		keep = append(keep, u)
	}
	clear(f.uses[len(keep):])
	f.uses = keep
	open := f.open[:0]
	for _, u := range f.open {
		if f.byID[u.ev.ID] == u {
			open = append(open, u)
		}
	}
	clear(f.open[len(open):])
	f.open = open
}

// Actions returns what the session waits for now.
func (f *Fold) Actions() Actions {
	a := Actions{Confirm: map[string]bool{}, CustomResults: map[string]bool{}, ToolResults: map[string]bool{}, TurnActive: f.turnActive}
	for _, u := range f.uses {
		switch {
		case !u.awaiting():
		case u.ev.Type == ma.EventAgentCustomToolUse:
			a.CustomResults[u.ev.ID] = true
		case u.allowedOnClient():
			a.ToolResults[u.ev.ID] = true
		default:
			a.Confirm[u.ev.ID] = true
		}
	}
	return a
}

// Clone returns an independent copy of the fold.
func (f *Fold) Clone() *Fold {
	c := &Fold{client: f.client, turnActive: f.turnActive, byID: make(map[string]*use, len(f.uses))}
	for _, u := range f.uses {
		cu := *u
		c.uses = append(c.uses, &cu)
		c.byID[cu.ev.ID] = &cu
	}
	for _, u := range f.open {
		c.open = append(c.open, c.byID[u.ev.ID])
	}
	return c
}

// Of folds a whole log (in seq order) into what the session waits for.
func Of(events []ma.Event, client bool) Actions {
	f := NewFold(client)
	for _, ev := range events {
		f.Feed(ev)
	}
	return f.Actions()
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
