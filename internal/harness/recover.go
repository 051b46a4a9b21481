package harness

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/reinsdev/reins/internal/store"
)

// panicError is a panic recovered from session runner code. The runner
// treats it as any other internal failure (unknown_error): retried once
// from the log, then the turn is abandoned.
type panicError struct {
	value any
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// Unwrap returns the panic value when it is an error.
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}

// safeStep is step with a panic turned into a *panicError.
func (r *runner) safeStep(ctx context.Context) (more bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.dropTurnContext()
			more, err = false, r.recovered(v)
		}
	}()
	return r.step(ctx)
}

// guard wraps a transaction function so that a panic in it (it runs on the
// store's goroutine, not the runner's) becomes an error that rolls the
// transaction back.
func (r *runner) guard(fn func(store.Tx) error) func(store.Tx) error {
	return func(tx store.Tx) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = r.recovered(v)
			}
		}()
		return fn(tx)
	}
}

// recovered logs a recovered panic with its stack and returns it as an
// error. It must be called from the deferred function that recovered.
func (r *runner) recovered(v any) error {
	r.h.log.Error("session runner panicked", "session", r.id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return &panicError{value: v}
}

// dropTurnContext cancels and forgets a turn context that a panic left
// behind (its release function never ran).
func (r *runner) dropTurnContext() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelTurn != nil {
		r.cancelTurn()
		r.cancelTurn = nil
	}
}
