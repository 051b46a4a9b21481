package app

import (
	"context"

	"github.com/reinsdev/reins/internal/harness"
	ma "github.com/reinsdev/reins/managedagents"
)

// Prepare implements harness.Preparer: a cloud session about to call its
// model is placed meanwhile when a slot is free at once, so that its
// sandbox starts during the model call and its first tool finds it
// ready. It does not wait in line for a slot nor take one from an idle
// session: a session that may never call a tool should not cost another
// its sandbox. Place, Idle and Release wait for a placement in flight.
func (t *hubTools) Prepare(sess *ma.Session) {
	t.mu.Lock()
	_, busy := t.preparing[sess.ID]
	placed := t.leases[sess.ID] != nil
	if busy || placed || t.ctx.Err() != nil {
		t.mu.Unlock()
		return
	}
	done := make(chan struct{})
	t.preparing[sess.ID] = done
	t.mu.Unlock()
	sess = new(*sess) // the runner's own may change meanwhile
	t.wg.Go(func() {
		defer func() {
			t.mu.Lock()
			delete(t.preparing, sess.ID)
			t.mu.Unlock()
			close(done)
		}()
		if err := t.prepare(sess); err != nil && t.ctx.Err() == nil {
			t.log.Debug("session not placed ahead of its first tool", "session", sess.ID, "err", err)
		}
	})
}

// prepare places a cloud session that a free slot can take now.
func (t *hubTools) prepare(sess *ma.Session) error {
	ctx, cancel := context.WithTimeout(t.ctx, localRegistrationWait)
	defer cancel()
	env, err := t.st.GetEnvironment(ctx, sess.EnvironmentID)
	if err != nil {
		return err
	}
	if env.CheckOutsideExecutors() == nil || !t.slots.tryTake(sess.ID) {
		return nil // self-hosted, or no slot free now: the first tool places it
	}
	req := t.assignRequest(sess, env.ID)
	if err := t.assignLocal(ctx, sess, req); err != nil {
		t.slots.release(sess.ID)
		return err
	}
	return nil
}

// awaitPrepare waits for the session's placement in flight, if any.
func (t *hubTools) awaitPrepare(ctx context.Context, sessionID string) error {
	t.mu.Lock()
	done := t.preparing[sessionID]
	t.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ harness.Preparer = (*hubTools)(nil)
