package sessions

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/awaiting"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// maxViews bounds the sessions whose folded view is kept in memory.
const maxViews = 4096

// logBatch is how many log entries a catch-up reads at a time.
const logBatch = 1000

// view is a session's log folded into what it waits for, up to seq.
type view struct {
	seq  int64
	fold *awaiting.Fold // never fed after it is stored: Clone it
}

// Send appends client events to the session's log in one transaction and
// returns them as appended. Tool confirmations and results are checked
// against what the session waits for as of that transaction, so of two
// inputs for one tool use exactly one is accepted; the other gets a
// *RejectedError. What the session waits for is folded from its log
// before the transaction; inside it only entries appended meanwhile are
// read. After the commit the service publishes the events, wakes or
// interrupts the runner, and wakes a worker of a dormant self-hosted
// session that got new input. rec, if set, runs last in the transaction.
func (s *Service) Send(ctx context.Context, id string, evs []ma.Event, rec Record) ([]ma.Event, error) {
	var base view
	if needsView(evs) {
		var err error
		if base, err = s.readView(ctx, id); err != nil {
			return nil, err
		}
	}
	var next view
	var interrupts []string
	sess, err := s.cfg.Writer.Update(ctx, id, func(tx store.Tx) error {
		var fold *awaiting.Fold
		if base.fold != nil {
			var err error
			if fold, err = catchUp(tx, base); err != nil {
				return err
			}
		}
		first := tx.LastSeq() + 1
		var err error
		interrupts, err = accept(tx, fold, evs)
		if err != nil {
			return err
		}
		if fold != nil {
			next = view{seq: tx.LastSeq(), fold: fold}
		}
		if rec == nil {
			return nil
		}
		return rec(tx, first)
	})
	if err != nil {
		return nil, err
	}
	if next.fold != nil {
		s.remember(id, next)
	}
	s.cfg.Bus.Publish(id)
	for _, th := range interrupts {
		s.cfg.Runner.Interrupt(id, th)
	}
	if interrupts == nil {
		s.cfg.Runner.Wake(id)
	}
	for _, ev := range evs {
		if ev.Type == ma.EventUserMessage || ev.Type == ma.EventSystemMessage || ev.Type == ma.EventUserDefineOutcome {
			// New input for a dormant self-hosted session wakes a worker.
			return evs, s.enqueueWork(ctx, &sess)
		}
	}
	return evs, nil
}

// needsView reports whether validating evs needs the session's state
// (plain messages do not).
func needsView(evs []ma.Event) bool {
	for _, ev := range evs {
		switch ev.Type {
		case ma.EventUserToolConfirmation, ma.EventUserCustomToolResult, ma.EventUserInterrupt, ma.EventUserToolResult, ma.EventSystemMessage:
			return true
		}
	}
	return false
}

// readView returns the session's view as of its log now, read outside
// any transaction: the committed view brought up to date, or, when none
// is kept or it was folded in another client mode (whether pull workers
// run the session's tools), the whole log folded anew.
func (s *Service) readView(ctx context.Context, id string) (view, error) {
	client, err := s.cfg.Store.SessionWorkAcked(ctx, id)
	if err != nil {
		return view{}, err
	}
	v := s.view(id)
	if v.fold == nil || v.fold.Client() != client {
		v = view{fold: awaiting.NewFold(client)}
	} else {
		v.fold = v.fold.Clone()
	}
	for {
		entries, err := s.cfg.Store.ReadLog(ctx, id, v.seq, logBatch)
		if err != nil {
			return view{}, err
		}
		for _, e := range entries {
			v.fold.Feed(e.Event)
			v.seq = e.Seq
		}
		if len(entries) < logBatch {
			return v, nil
		}
	}
}

// catchUp returns base's fold brought up to the transaction's last entry,
// as a copy: base itself is not changed. Only what was appended since
// base was read is read here; a base ahead of the log (which a commit
// that base saw and that was then undone would leave) is folded anew.
func catchUp(tx store.Tx, base view) (*awaiting.Fold, error) {
	last := tx.LastSeq()
	if last == base.seq {
		return base.fold.Clone(), nil
	}
	fold, after := base.fold.Clone(), base.seq
	if base.seq > last {
		fold, after = awaiting.NewFold(base.fold.Client()), 0
	}
	entries, err := tx.ReadLog(after)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		fold.Feed(e.Event)
	}
	return fold, nil
}

// accept validates and appends evs in tx; fold, if set, is what the
// session waits for and is fed each accepted event. It returns the threads
// whose runners an interrupt must stop, each once ("" for the primary,
// which stops them all).
func accept(tx store.Tx, fold *awaiting.Fold, evs []ma.Event) (interrupts []string, err error) {
	sess := tx.Session()
	if sess.ArchivedAt != nil {
		return nil, conflict("session %s is archived; it accepts no events", sess.ID)
	}
	if sess.Status == ma.StatusTerminated {
		return nil, conflict("session %s is terminated; it accepts no events", sess.ID)
	}
	now := ma.Time(time.Now())
	for i := range evs {
		ev := &evs[i]
		var prev *ma.Event
		if i > 0 {
			prev = &evs[i-1]
		}
		f := fmt.Sprintf("events[%d]", i)
		stop, err := check(sess, fold, f, ev, prev, now)
		if err != nil {
			return nil, err
		}
		if err := route(tx, f, ev); err != nil {
			return nil, err
		}
		if th := ma.StreamThread(sess.ID, ev); stop && !slices.Contains(interrupts, th) {
			interrupts = append(interrupts, th)
		}
		if err := tx.Append(ev); err != nil {
			return nil, err
		}
		if fold != nil {
			fold.Feed(*ev)
		}
	}
	return interrupts, nil
}

// check validates one event against what the session waits for and sets
// its processed_at when it is processed on receipt. It reports whether the
// event is an interrupt that must stop the runner.
func check(sess *ma.Session, fold *awaiting.Fold, f string, ev, prev *ma.Event, now string) (bool, error) {
	var a awaiting.Actions
	if fold != nil {
		a = fold.Actions()
	}
	switch ev.Type {
	case ma.EventUserToolConfirmation:
		if !a.Confirm[ev.ToolUseID] {
			return false, rejected("%s.tool_use_id: %s is not a tool use awaiting confirmation", f, ev.ToolUseID)
		}
		ev.ProcessedAt = &now
	case ma.EventUserToolResult:
		if !a.ToolResults[ev.ToolUseID] {
			return false, rejected("%s.tool_use_id: %s is not a tool use awaiting a result from a self-hosted worker", f, ev.ToolUseID)
		}
		ev.ProcessedAt = &now
	case ma.EventUserCustomToolResult:
		if !a.CustomResults[ev.CustomToolUseID] {
			return false, rejected("%s.custom_tool_use_id: %s is not a custom tool use awaiting a result", f, ev.CustomToolUseID)
		}
		ev.ProcessedAt = &now
	case ma.EventSystemMessage:
		// While the session waits on requires_action, a system message may
		// only trail a tool result.
		waiting := a.TurnActive && sess.Status != ma.StatusRunning
		if waiting && prev != nil && prev.Type == ma.EventUserMessage {
			return false, rejected("%s: the session is waiting for tool results (requires_action); a system.message is accepted only after a tool result", f)
		}
	case ma.EventUserDefineOutcome:
		return false, acceptOutcome(sess, f, ev)
	case ma.EventUserInterrupt:
		if sess.Status == ma.StatusIdle && !a.TurnActive && !PausedOutcome(sess) {
			ev.ProcessedAt = &now // no-op on an idle session
			return false, nil
		}
		return true, nil
	}
	return false, nil
}

// view returns the session's committed view (zero if none is kept).
func (s *Service) view(id string) view {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.views[id]
}

// remember keeps v as the session's view unless a later one is kept.
func (s *Service) remember(id string, v view) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.views[id]; ok && cur.seq >= v.seq {
		return
	}
	if _, ok := s.views[id]; !ok && len(s.views) >= maxViews {
		for k := range s.views { // evict one at random
			delete(s.views, k)
			break
		}
	}
	s.views[id] = v
}
