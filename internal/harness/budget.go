package harness

import (
	"context"
	"encoding/json"
	"time"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// meter adds a model call's list cost to the session's account and
// refreshes its reported usage. A child thread's session row shares its
// meter with the session's.
func (r *runner) meter(s *ma.Session, modelID string, u model.Usage, now string) {
	m := meterOf(s)
	if pico, ok := r.h.cfg.Prices.Call(modelID, u); ok {
		m.CallPico += pico
	} else {
		m.Unpriced = true
	}
	sessions.FillUsage(r.h.cfg.Prices, &s.Usage, parseNow(now))
}

// meterOf is a session's meter, made on first use.
func meterOf(s *ma.Session) *ma.Meter {
	if s.Usage.Meter == nil {
		s.Usage.Meter = &ma.Meter{}
	}
	return s.Usage.Meter
}

// clock counts the session's running time as its status changes, and logs
// a session.usage snapshot as it goes idle (before the status event).
func (r *runner) clock(tx store.Tx, s *ma.Session, status, now string) error {
	m := meterOf(s)
	t := parseNow(now)
	switch {
	case status == ma.StatusRunning && m.RunningSince == "":
		m.RunningSince = now
	case status != ma.StatusRunning && m.RunningSince != "":
		m.ActiveNanos = int64(sessions.Active(m, t))
		m.RunningSince = ""
	}
	sessions.FillUsage(r.h.cfg.Prices, &s.Usage, t)
	if status != ma.StatusIdle {
		return nil
	}
	return tx.Append(usageEvent(s, now))
}

// usageEvent is a session.usage snapshot of s.
func usageEvent(s *ma.Session, now string) *ma.Event {
	u := s.Usage
	u.Meter = nil
	usage, _ := json.Marshal(u)
	budget, _ := json.Marshal(s.Budget)
	return &ma.Event{Type: ma.EventSessionUsage, ProcessedAt: &now, Usage: usage, Budget: budget}
}

// withinBudget reports whether the session may make its next model
// request: its exact list cost, runtime included, is below its budget.
func (r *runner) withinBudget(s *ma.Session) bool {
	return sessions.Within(r.h.cfg.Prices, &s.Usage, s.Budget, time.Now())
}

// isThread reports whether tx is a child thread's transaction.
func isThread(tx store.Tx) bool {
	t, ok := tx.(*threadTx)
	return ok && t.row != nil
}

// parseNow reads a harness timestamp.
func parseNow(now string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, now)
	if err != nil {
		return time.Now()
	}
	return t
}

// overBudget reports whether the session's cost, read afresh (every
// thread spends), reached its budget: a child thread then pauses before
// its next model request, and a primary thread waiting for its children
// goes idle with budget_reached.
func (r *runner) overBudget(ctx context.Context) (bool, error) {
	if r.sess != nil && r.sess.Budget == nil {
		return false, nil // a budget is never added after creation
	}
	s, err := r.h.cfg.Store.GetSession(ctx, r.id)
	if err != nil {
		return false, err
	}
	return !r.withinBudget(&s), nil
}

// stopAtBudget makes the session go idle with budget_reached: it waits
// there until the budget is raised or removed.
func (r *runner) stopAtBudget(ctx context.Context) error {
	return r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopBudgetReached, nil) })
}
