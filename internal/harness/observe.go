package harness

import (
	"context"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Observer is told what the runners do, for metrics and traces (package
// telemetry implements it). Its methods are called on the runners'
// goroutines and must be quick: they must not block.
//
// Turn, ModelCall and ToolCall begin a piece of work and return the
// function that ends it with its outcome, and a context carrying it (a
// trace span) that the runner passes as parent to the work inside it; the
// runner uses those contexts for nothing else.
type Observer interface {
	// Turn begins a turn of the session: the runner set it running, or
	// took up a turn an earlier runner left (after a restart or a lease
	// takeover). Its outcome is the stop reason of the idle status that
	// ends it (end_turn, requires_action, retries_exhausted),
	// "interrupted", "terminated", or "suspended" when the runner leaves
	// mid-turn (shutdown, lost lease, waiting for a pull worker).
	Turn(parent context.Context, sessionID string) (context.Context, func(outcome string))
	// ModelCall begins one attempt of a model call; its outcome is "ok",
	// "error", "interrupted" or "canceled" (shutdown, lost lease).
	ModelCall(parent context.Context, sessionID, modelID string) (context.Context, func(outcome string))
	// ToolCall begins a tool call the server runs: a built-in tool, or a
	// tool of the MCP server mcpServer ("" for a built-in tool). Its
	// outcome is "ok", "error" (an error result), "interrupted" or
	// "canceled".
	ToolCall(parent context.Context, sessionID, tool, mcpServer string) (context.Context, func(outcome string))
	// SessionError counts a session.error event the runner committed.
	SessionError(errType, retryStatus string)
	// LeaseTakeover counts an acquisition of a session's lease that
	// another owner held and had let expire (from is that owner), or that
	// this owner held and let expire.
	LeaseTakeover(sessionID, from string)
}

// Outcomes of calls reported to an Observer.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"
	OutcomeInterrupted = "interrupted"
	OutcomeCanceled    = "canceled"
	// OutcomeSuspended ends a turn whose runner left before its end.
	OutcomeSuspended = "suspended"
	// OutcomeTerminated ends a turn whose session was terminated.
	OutcomeTerminated = "terminated"
)

// nopObserver observes nothing.
type nopObserver struct{}

func nopEnd(string) {}

func (nopObserver) Turn(ctx context.Context, _ string) (context.Context, func(string)) {
	return ctx, nopEnd
}

func (nopObserver) ModelCall(ctx context.Context, _, _ string) (context.Context, func(string)) {
	return ctx, nopEnd
}

func (nopObserver) ToolCall(ctx context.Context, _, _, _ string) (context.Context, func(string)) {
	return ctx, nopEnd
}

func (nopObserver) SessionError(string, string)  {}
func (nopObserver) LeaseTakeover(string, string) {}

// turnObs is the observation of the turn a runner is in.
type turnObs struct {
	ctx context.Context // carries the turn (parent of its calls)
	end func(outcome string)
	// model carries the latest model call of the turn: the parent of
	// the tool calls it asked for (nil: none yet in this runner).
	model context.Context
}

// observedTx is a transaction of a runner that notes what to report once
// it commits: the session.error events appended and the outcome of a
// turn the transaction ends.
type observedTx struct {
	store.Tx
	r *runner
}

// Append implements store.Tx.
func (tx observedTx) Append(evs ...*ma.Event) error {
	for _, ev := range evs {
		if ev.Type == ma.EventSessionError && ev.Error != nil {
			tx.r.obs.errors = append(tx.r.obs.errors, ev.Error)
		}
	}
	return tx.Tx.Append(evs...)
}

// txObs is what a runner's transaction leaves to report after its commit.
type txObs struct {
	errors []*ma.SessionError
	// outcome is the outcome of the turn the transaction ends (set with
	// the idle or terminated status).
	outcome string
}

// observed wraps fn so that what it appends is noted for observe; each
// attempt of the transaction starts afresh.
func (r *runner) observed(fn func(store.Tx) error) func(store.Tx) error {
	return func(tx store.Tx) error {
		r.obs.errors, r.obs.outcome = r.obs.errors[:0], ""
		return fn(observedTx{Tx: tx, r: r})
	}
}

// observe reports what a committed transaction did, given the session
// row it left.
func (r *runner) observe(s *ma.Session) {
	o := r.h.obs
	for _, e := range r.obs.errors {
		o.SessionError(e.Type, e.RetryStatus.Type)
	}
	r.obs.errors = r.obs.errors[:0]
	r.observeStatus(s.Status, r.obs.outcome)
}

// observeStatus begins a turn observation when the session is running
// without one, and ends it when the session went idle or was terminated.
func (r *runner) observeStatus(status, outcome string) {
	switch {
	case status == ma.StatusRunning && r.turn == nil:
		ctx, end := r.h.obs.Turn(context.Background(), r.id)
		r.turn = &turnObs{ctx: ctx, end: end}
	case (status == ma.StatusIdle || status == ma.StatusTerminated) && r.turn != nil:
		if outcome == "" {
			// Not this transaction's doing (a turn that another
			// runner ended, say): the status is all there is to say.
			outcome = status
		}
		r.endTurn(outcome)
	}
}

// endTurn ends the turn observation, if any.
func (r *runner) endTurn(outcome string) {
	if r.turn != nil {
		r.turn.end(outcome)
		r.turn = nil
	}
}

// turnParent returns the context of the turn's observation, the parent of
// a model call.
func (r *runner) turnParent() context.Context {
	if r.turn == nil {
		return context.Background()
	}
	return r.turn.ctx
}

// toolParent returns the parent of a tool call's observation: the model
// call that asked for it when this runner made it, else the turn.
func (r *runner) toolParent() context.Context {
	if r.turn != nil && r.turn.model != nil {
		return r.turn.model
	}
	return r.turnParent()
}

// callOutcome names the outcome of a call that returned err (or a result
// with isError), given whether an interrupt or the runner's end cut it.
func callOutcome(ctx context.Context, interrupted, failed bool) string {
	switch {
	case ctx.Err() != nil:
		return OutcomeCanceled
	case interrupted:
		return OutcomeInterrupted
	case failed:
		return OutcomeError
	}
	return OutcomeOK
}
