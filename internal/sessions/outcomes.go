package sessions

import (
	"fmt"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/outcomes"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// outcomeTx is a transaction whose appends keep the session row's
// outcome_evaluations: each appended event is fed to the outcomes fold,
// resumed from the row, the one rule the harness follows too. Every
// write of a session goes through it (Writer.Update, Create).
type outcomeTx struct {
	store.Tx
	fold *outcomes.Fold
}

// withOutcomes wraps fn so that its appends keep the row's
// outcome_evaluations.
func withOutcomes(fn func(store.Tx) error) func(store.Tx) error {
	return func(tx store.Tx) error {
		return fn(&outcomeTx{Tx: tx})
	}
}

// Append implements store.Tx.
func (t *outcomeTx) Append(evs ...*ma.Event) error {
	if err := t.Tx.Append(evs...); err != nil {
		return err
	}
	if t.fold == nil {
		t.fold = outcomes.Resume(t.Session().OutcomeEvaluations)
	}
	for _, ev := range evs {
		t.fold.Feed(*ev)
	}
	if t.fold.Changed() {
		t.Session().OutcomeEvaluations = t.fold.Evaluations()
	}
	return nil
}

// acceptOutcome checks a user.define_outcome against the session (one
// outcome at a time, the earlier one possibly defined in the same
// request) and gives it its outcome_id and max_iterations.
func acceptOutcome(sess *ma.Session, f string, ev *ma.Event) error {
	if o, open := outcomes.Open(sess.OutcomeEvaluations); open {
		return rejected("%s: outcome %s is %s; only one outcome is active at a time (send the next one after its span.outcome_evaluation_end)",
			f, o.OutcomeID, o.Result)
	}
	if ev.MaxIterations == nil {
		n := int64(outcomes.DefaultMaxIterations)
		ev.MaxIterations = &n
	}
	if n := *ev.MaxIterations; n < 1 || n > outcomes.MaxIterations {
		return rejected("%s.max_iterations: must be 1 to %d; got %d", f, outcomes.MaxIterations, n)
	}
	if ev.OutcomeID == "" {
		ev.OutcomeID = ids.New(ids.Outcome)
	}
	return nil
}

// outcomeField names an initial event in errors.
func outcomeField(i int) string { return fmt.Sprintf("initial_events[%d]", i) }

// PausedOutcome reports whether sess waits at its budget
// (budget_reached) with an outcome under way: the wait pauses the
// outcome, and an interrupt ends both (interrupted), so the runner
// consumes it as it would a running turn's.
func PausedOutcome(sess *ma.Session) bool {
	if sess.Status != ma.StatusIdle || sess.StopReason == nil || sess.StopReason.Type != ma.StopBudgetReached {
		return false
	}
	_, open := outcomes.Open(sess.OutcomeEvaluations)
	return open
}
