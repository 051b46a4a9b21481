// Package awaiting folds a session's log into what the session waits for
// from its client: tool confirmations, custom tool results, pull workers'
// tool results, and whether a turn is in progress. It is a leaf: it knows
// the API's event types and nothing of the store, the harness or HTTP, so
// that the sessions service (which checks client input against it) and
// the harness's runner (which acts on it) share one rule.
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

// Use is a tool use the model asked for that is not settled: it has no
// result, and no new user message or end of its turn left it unanswered.
type Use struct {
	// Event is the tool use as the log records it.
	Event ma.Event
	// ClientRuns: a pull worker runs this built-in tool and answers with
	// user.tool_result.
	ClientRuns bool
	// Decision is "" or "allow", from a user.tool_confirmation (a deny
	// settles the use).
	Decision string
}

// Allowed reports whether the tool use may run: its permission policy
// allows it, or the user confirmed it.
func (u Use) Allowed() bool {
	return u.Event.EvaluatedPermission == "allow" || u.Decision == "allow"
}

// Awaiting reports whether the tool use waits for the client: a custom
// tool without result, an always_ask tool without confirmation, or a tool
// a pull worker runs without result.
func (u Use) Awaiting() bool {
	switch {
	case u.Event.Type == ma.EventAgentCustomToolUse:
		return true
	case u.Event.EvaluatedPermission == "ask" && u.Decision == "":
		return true
	default:
		return u.AwaitsWorker()
	}
}

// AwaitsWorker reports whether the tool use waits for a pull worker's
// user.tool_result.
func (u Use) AwaitsWorker() bool {
	return u.ClientRuns && u.Allowed()
}

// use is a tool use in the fold, settled or not.
type use struct {
	Use
	resolved  bool // a result exists, or the user denied it
	abandoned bool // a new user message or the turn's end left it unanswered
}

// Fold folds a session's log, entry by entry and in seq order, into what
// the session waits for: the one rule the sessions service checks client
// input against and the harness's runner acts on. It keeps only the tool
// uses that are not settled (resolved or abandoned), so it stays small
// however long the log grows, and it can be fed every entry including
// echoes: a queued client event counts at its processed echo. It is not
// safe for concurrent use; Clone it to try events out.
type Fold struct {
	client bool
	// uses are the unsettled tool uses, in the order the model asked:
	// those of the current model response(s), which a new user message
	// or the turn's end abandons.
	uses       []*use
	byID       map[string]*use // uses by event id
	turnActive bool
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
			f.abandon()
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
		if u := f.byID[ev.ToolUseID]; u != nil && u.Decision == "" {
			u.Decision = ev.Result
			u.resolved = ev.Result == "deny"
		}
	case ma.EventUserCustomToolResult, ma.EventUserToolResult, ma.EventAgentMCPToolResult:
		f.result(firstNonEmpty(ev.ToolUseID, ev.CustomToolUseID, ev.MCPToolUseID))
	case ma.EventStatusRunning:
		f.turnActive = true
	case ma.EventStatusIdle:
		if ev.StopReason == nil || ev.StopReason.Type != ma.StopRequiresAction {
			f.turnActive = false
			f.abandon()
		}
	case ma.EventStatusTerminated:
		f.turnActive = false
	}
	f.prune()
}

// use folds a tool use.
func (f *Fold) use(ev ma.Event) {
	u := &use{Use: Use{Event: ev, ClientRuns: f.client && ev.Type == ma.EventAgentToolUse && ev.EvaluatedPermission != "deny" && ev.Name != toolset.WebFetch}}
	f.uses = append(f.uses, u)
	f.byID[ev.ID] = u
}

// result folds the result of the tool use with that id.
func (f *Fold) result(id string) {
	if u := f.byID[id]; u != nil {
		u.resolved = true
	}
}

// abandon abandons the tool uses without a result: a new user message or
// the end of the turn leaves them unanswered for good.
func (f *Fold) abandon() {
	for _, u := range f.uses {
		if !u.resolved {
			u.abandoned = true
		}
	}
}

// prune forgets settled tool uses: nothing later makes them await again.
func (f *Fold) prune() {
	keep := f.uses[:0]
	for _, u := range f.uses {
		if u.resolved || u.abandoned {
			delete(f.byID, u.Event.ID)
			continue
		}
		keep = append(keep, u)
	}
	clear(f.uses[len(keep):])
	f.uses = keep
}

// TurnActive reports a turn in progress (running, or idle waiting on
// requires_action).
func (f *Fold) TurnActive() bool { return f.turnActive }

// Pending returns the tool uses that are not settled, in the order the
// model asked: those a new user message or the turn's end abandons.
func (f *Fold) Pending() []Use {
	out := make([]Use, 0, len(f.uses))
	for _, u := range f.uses {
		out = append(out, u.Use)
	}
	return out
}

// Find returns the unsettled tool use with that event id.
func (f *Fold) Find(id string) (Use, bool) {
	if u := f.byID[id]; u != nil {
		return u.Use, true
	}
	return Use{}, false
}

// Awaiting returns the ids of the tool uses that wait for the client, in
// the order the model asked.
func (f *Fold) Awaiting() []string {
	var ids []string
	for _, u := range f.uses {
		if u.Awaiting() {
			ids = append(ids, u.Event.ID)
		}
	}
	return ids
}

// AwaitsWorker reports whether some tool use waits for a pull worker.
func (f *Fold) AwaitsWorker() bool {
	for _, u := range f.uses {
		if u.AwaitsWorker() {
			return true
		}
	}
	return false
}

// Actions returns what the session waits for now.
func (f *Fold) Actions() Actions {
	a := Actions{Confirm: map[string]bool{}, CustomResults: map[string]bool{}, ToolResults: map[string]bool{}, TurnActive: f.turnActive}
	for _, u := range f.uses {
		switch {
		case !u.Awaiting():
		case u.Event.Type == ma.EventAgentCustomToolUse:
			a.CustomResults[u.Event.ID] = true
		case u.AwaitsWorker():
			a.ToolResults[u.Event.ID] = true
		default:
			a.Confirm[u.Event.ID] = true
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
		c.byID[cu.Event.ID] = &cu
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
