// Package outcomes folds a session's log into the state of its outcomes
// (user.define_outcome and the span.outcome_evaluation_* events): the
// session's outcome_evaluations, and, for the harness, the outcome the
// agent works on. It is a leaf like package awaiting: it knows the API's
// event types and nothing of the store, the harness or HTTP, so that the
// session row (kept by the sessions service's writer in the transaction
// that appends the events) and the harness's runner (which acts on it)
// follow one rule.
package outcomes

import (
	"fmt"
	"slices"

	ma "github.com/reinsdev/reins/managedagents"
)

// Active is the outcome the agent works on or the grader evaluates, as
// the log says. The harness reads it; a fold resumed from a session row
// (Resume) knows no Active.
type Active struct {
	// Define is the processed user.define_outcome (its rubric resolved to
	// text at receipt).
	Define ma.Event
	// Iteration is the 0-based cycle the outcome is on.
	Iteration int64
	// StartID is the id of the span.outcome_evaluation_start without an
	// end ("" while the agent works).
	StartID string
	// Answer is the content of the agent.message events of the latest
	// model response: the agent's final answer once its turn ended.
	Answer []ma.ContentBlock
}

// Evaluating reports whether the grader evaluates the outcome now.
func (a *Active) Evaluating() bool { return a.StartID != "" }

// MaxIterations is the outcome's max_iterations (DefaultMaxIterations
// when the echo has none).
func (a *Active) MaxIterations() int64 {
	if a.Define.MaxIterations == nil {
		return DefaultMaxIterations
	}
	return *a.Define.MaxIterations
}

// Fold folds a session's log, event by event in seq order, into its
// outcomes. It is fed every event, echoes included: a queued
// user.define_outcome is pending, its processed echo starts the outcome.
// It is not safe for concurrent use.
type Fold struct {
	evals   []ma.OutcomeEvaluation
	active  *Active
	changed bool
	// interrupted: a user.interrupt was processed while the current
	// outcome was not ended.
	interrupted bool
	// lastAt is the latest processed_at fed (a flushed event has none).
	lastAt string
}

// NewFold returns the fold of an empty log.
func NewFold() *Fold { return &Fold{} }

// Resume returns a fold that continues from a session row's
// outcome_evaluations (it knows no Active).
func Resume(evals []ma.OutcomeEvaluation) *Fold {
	return &Fold{evals: slices.Clone(evals)}
}

// Evaluations returns the session's outcome_evaluations (never nil).
func (f *Fold) Evaluations() []ma.OutcomeEvaluation {
	if f.evals == nil {
		return []ma.OutcomeEvaluation{}
	}
	return slices.Clone(f.evals)
}

// Changed reports whether a Feed changed the evaluations.
func (f *Fold) Changed() bool { return f.changed }

// Active returns the outcome the agent works on or the grader evaluates
// (nil: none).
func (f *Fold) Active() *Active { return f.active }

// Open reports whether an outcome has not ended (pending, running or
// evaluating): a new user.define_outcome is refused until it has.
func Open(evals []ma.OutcomeEvaluation) (ma.OutcomeEvaluation, bool) {
	for _, e := range evals {
		if !e.Ended() {
			return e, true
		}
	}
	return ma.OutcomeEvaluation{}, false
}

// Feed folds the next log event.
func (f *Fold) Feed(ev ma.Event) {
	if ev.ProcessedAt != nil {
		f.lastAt = *ev.ProcessedAt
	}
	switch ev.Type {
	case ma.EventUserDefineOutcome:
		f.define(ev)
	case ma.EventSpanOutcomeEvaluationStart:
		f.start(ev)
	case ma.EventSpanOutcomeEvaluationEnd:
		f.end(ev)
	case ma.EventSpanModelRequestStart:
		if f.active != nil {
			f.active.Answer = nil // a new response: a new answer
		}
	case ma.EventAgentMessage:
		if f.active != nil {
			f.active.Answer = append(f.active.Answer, ev.Content...)
		}
	case ma.EventUserInterrupt:
		if ev.ProcessedAt != nil && f.current() >= 0 {
			f.interrupted = true
		}
	case ma.EventStatusIdle:
		// Waiting for the client, or for a budget raised, pauses the
		// work: the session resumes by itself when either comes.
		if ev.StopReason == nil || (ev.StopReason.Type != ma.StopRequiresAction && ev.StopReason.Type != ma.StopBudgetReached) {
			f.turnEnded(ev, stopType(ev))
		}
	case ma.EventStatusTerminated:
		f.turnEnded(ev, "terminated")
	}
}

// define folds a user.define_outcome: queued, processed or flushed.
func (f *Fold) define(ev ma.Event) {
	i := f.index(ev.OutcomeID)
	if i < 0 {
		f.evals = append(f.evals, ma.OutcomeEvaluation{Type: "outcome_evaluation", OutcomeID: ev.OutcomeID, Description: ev.Description,
			Result: ma.OutcomePending})
		i = len(f.evals) - 1
		f.changed = true
	}
	e := &f.evals[i]
	switch {
	case ev.Flushed && !e.Ended():
		f.finish(e, ma.OutcomeFailed, "the outcome was discarded before the agent began: the turn ahead of it failed", f.lastAt)
	case ev.ProcessedAt != nil && e.Result == ma.OutcomePending:
		e.Result = ma.OutcomeRunning
		f.active = &Active{Define: ev}
		f.interrupted = false
		f.changed = true
	}
}

// start folds a span.outcome_evaluation_start.
func (f *Fold) start(ev ma.Event) {
	i := f.index(ev.OutcomeID)
	if i < 0 || f.evals[i].Ended() {
		return
	}
	e := &f.evals[i]
	e.Result = ma.OutcomeEvaluating
	if ev.Iteration != nil {
		e.Iteration = *ev.Iteration
	}
	f.changed = true
	if f.active != nil && f.active.Define.OutcomeID == ev.OutcomeID {
		f.active.StartID, f.active.Iteration = ev.ID, e.Iteration
	}
}

// end folds a span.outcome_evaluation_end: needs_revision sends the agent
// back to work on the next cycle, any other result ends the outcome.
func (f *Fold) end(ev ma.Event) {
	i := f.index(ev.OutcomeID)
	if i < 0 || f.evals[i].Ended() {
		return
	}
	e := &f.evals[i]
	explanation := ""
	if ev.Explanation != nil {
		explanation = *ev.Explanation
	}
	f.changed = true
	if ev.Result != ma.OutcomeNeedsRevision {
		at := f.lastAt
		f.finish(e, ev.Result, explanation, at)
		return
	}
	e.Result, e.Explanation = ma.OutcomeRunning, &explanation
	e.Iteration++
	if f.active != nil && f.active.Define.OutcomeID == ev.OutcomeID {
		f.active.StartID, f.active.Iteration, f.active.Answer = "", e.Iteration, nil
	}
}

// turnEnded ends the current outcome when the agent's turn ended without
// a verdict ending it: interrupted after a user.interrupt, failed
// otherwise (an exhausted retry, a terminated session).
func (f *Fold) turnEnded(ev ma.Event, reason string) {
	i := f.current()
	if i < 0 {
		return
	}
	at := f.lastAt
	if f.interrupted {
		f.finish(&f.evals[i], ma.OutcomeInterrupted, "the user interrupted the session before the outcome was evaluated", at)
		return
	}
	f.finish(&f.evals[i], ma.OutcomeFailed, fmt.Sprintf("the agent's turn ended (%s) before the outcome was evaluated", reason), at)
}

// finish ends an outcome with a terminal result.
func (f *Fold) finish(e *ma.OutcomeEvaluation, result, explanation, at string) {
	e.Result = result
	if explanation != "" || e.Explanation == nil {
		e.Explanation = &explanation
	}
	e.CompletedAt = &at
	f.changed = true
	if f.active != nil && f.active.Define.OutcomeID == e.OutcomeID {
		f.active = nil
	}
	f.interrupted = false
}

// current returns the index of the outcome that is running or evaluating
// (-1: none).
func (f *Fold) current() int {
	for i, e := range f.evals {
		if e.Result == ma.OutcomeRunning || e.Result == ma.OutcomeEvaluating {
			return i
		}
	}
	return -1
}

func (f *Fold) index(id string) int {
	return slices.IndexFunc(f.evals, func(e ma.OutcomeEvaluation) bool { return e.OutcomeID == id })
}

func stopType(ev ma.Event) string {
	if ev.StopReason == nil {
		return "idle"
	}
	return ev.StopReason.Type
}
