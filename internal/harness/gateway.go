package harness

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// The model gateway's writes for a turn on an agent end (package
// gateway): they run on the turn's runner, through its one write path,
// like the built-in loop's model calls.

// agentCall is a write of the model gateway on its way to the runner of
// the turn, which runs fn and answers on reply.
type agentCall struct {
	fn    func(ctx context.Context, r *runner) error
	reply chan error
}

// errTurnExhausted ends the turn: a model call of the gateway exhausted
// its retries (the session is idle, retries_exhausted).
var errTurnExhausted = errors.New("the turn ended: a model call exhausted its retries")

// do runs fn on the turn's runner.
func (t *ActiveTurn) do(ctx context.Context, fn func(ctx context.Context, r *runner) error) error {
	c := agentCall{fn: fn, reply: make(chan error, 1)}
	err, sent := askRunner(ctx, t.modelCalls, c, c.reply, t.gone)
	if sent != nil {
		return sent
	}
	return err
}

// Model is the id of the session agent's model.
func (t *ActiveTurn) Model() string { return t.model }

// StartModelRequest appends span.model_request_start for a gateway call
// and returns its id; ErrTurnInactive once the turn ended.
func (t *ActiveTurn) StartModelRequest(ctx context.Context) (string, error) {
	id := ids.New(ids.Event)
	err := t.do(ctx, func(ctx context.Context, r *runner) error {
		err := r.update(ctx, func(tx store.Tx) error {
			if tx.Session().Status != ma.StatusRunning {
				return ErrTurnInactive
			}
			now := r.h.now()
			return tx.Append(&ma.Event{Type: ma.EventSpanModelRequestStart, ID: id, ProcessedAt: &now})
		})
		if err == nil {
			t.openSpans[id] = true
		}
		return err
	})
	return id, err
}

// EndModelRequest closes a gateway call's span with its usage, which the
// session's totals count; failed marks a response cut short.
func (t *ActiveTurn) EndModelRequest(ctx context.Context, span string, u model.Usage, failed bool) error {
	return t.do(ctx, func(ctx context.Context, r *runner) error {
		delete(t.openSpans, span)
		return r.update(ctx, func(tx store.Tx) error {
			return r.endSpan(tx, tx.Session().Agent.Model.ID, span, failed, u, r.h.now())
		})
	})
}

// FailModelRequest closes a failed gateway call's span and applies the
// session's retry policy, as the built-in loop does: a retrying
// session.error and the delay before the next attempt, or an exhausted
// one that ends the turn (retry false; what the agent end sends for the
// turn afterwards is turn_inactive).
func (t *ActiveTurn) FailModelRequest(ctx context.Context, span string, me *model.Error, attempt int) (time.Duration, bool, error) {
	var delay time.Duration
	err := t.do(ctx, func(ctx context.Context, r *runner) error {
		delete(t.openSpans, span)
		d, exhausted, err := r.recordFailure(ctx, classify(me), attempt, span)
		switch {
		case err != nil:
			return err
		case exhausted:
			return errTurnExhausted
		}
		delay = d
		return nil
	})
	if errors.Is(err, errTurnExhausted) {
		return 0, false, nil
	}
	return delay, err == nil, err
}

// closeSpans closes the gateway's spans of the turn still open when its
// loop ends (an interrupt or the loss of the agent end cut their calls
// short), as failed.
func (r *runner) closeSpans(ctx context.Context, t *ActiveTurn) error {
	if len(t.openSpans) == 0 {
		return nil
	}
	err := r.update(ctx, func(tx store.Tx) error { return appendSpanEnds(tx, t, r.h.now()) })
	if err == nil {
		clear(t.openSpans)
	}
	return err
}

// appendSpanEnds appends a failed span end for each of the turn's open
// gateway spans; the caller forgets them once the transaction commits.
func appendSpanEnds(tx store.Tx, t *ActiveTurn, now string) error {
	for _, span := range slices.Sorted(maps.Keys(t.openSpans)) {
		if err := tx.Append(spanEnd(span, true, nil, now)); err != nil {
			return err
		}
	}
	return nil
}
