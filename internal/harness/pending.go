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
// for. client says whether pull workers run the session's built-in tools.
func PendingActions(events []ma.Event, client bool) Actions {
	f := NewActionFold(client)
	for _, ev := range events {
		f.Feed(ev)
	}
	return f.Actions()
}

// ActionFold folds a session's log, entry by entry and in seq order, into
// what the session waits for, with the rules the runner's projection uses.
// It keeps only the tool uses that are not settled (resolved or abandoned),
// so it stays small however long the log grows, and it can be fed every
// entry including echoes: a queued client event counts at its processed
// echo. It is not safe for concurrent use; Clone it to try events out.
type ActionFold struct {
	p *projector
}

// NewActionFold returns the fold of an empty log. client says whether pull
// workers run the session's built-in tools.
func NewActionFold(client bool) *ActionFold {
	p := newProjector(client, "", "")
	p.tb.off = true
	return &ActionFold{p: p}
}

// Client reports the client mode the fold was built with.
func (f *ActionFold) Client() bool { return f.p.client }

// Feed folds the next log entry's event.
func (f *ActionFold) Feed(ev ma.Event) {
	f.p.feed(ev)
	f.prune()
}

// prune forgets settled tool uses: nothing later makes them await again.
func (f *ActionFold) prune() {
	v := f.p.v
	keep := v.uses[:0]
	for _, u := range v.uses {
		if u.resolved || u.abandoned {
			delete(v.byID, u.ev.ID)
			continue
		}
		keep = append(keep, u)
	}
	clear(v.uses[len(keep):])
	v.uses = keep
	open := f.p.open[:0]
	for _, u := range f.p.open {
		if v.byID[u.ev.ID] == u {
			open = append(open, u)
		}
	}
	clear(f.p.open[len(open):])
	f.p.open = open
}

// Actions returns what the session waits for now.
func (f *ActionFold) Actions() Actions {
	v := f.p.v
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

// Clone returns an independent copy of the fold.
func (f *ActionFold) Clone() *ActionFold {
	p := newProjector(f.p.client, "", "")
	p.tb.off = true
	src := f.p.v
	v := p.v
	v.turnActive, v.openSpan = src.turnActive, src.openSpan
	v.lastIdleIDs = append([]string(nil), src.lastIdleIDs...)
	for _, u := range src.uses {
		c := *u
		v.uses = append(v.uses, &c)
		v.byID[c.ev.ID] = &c
	}
	for _, u := range f.p.open {
		p.open = append(p.open, v.byID[u.ev.ID])
	}
	return &ActionFold{p: p}
}
