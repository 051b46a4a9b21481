package app

import (
	"context"
	"errors"

	"github.com/reinsdev/reins/harness"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/workqueue"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// workers links the work queue and the harness: it tells the harness which
// sessions pull workers serve (harness.WorkerHost), and wakes sessions when
// workers come and go (workqueue.Sessions).
type workers struct {
	st      store.Store
	q       *workqueue.Service
	h       *harness.Harness
	hosting *sessions.Hosting // the one rule for "self-hosted"
}

// Serving implements harness.WorkerHost: a session is served by pull
// workers once one acknowledged its work; one is present while an item is
// acknowledged and its lease holds.
func (w *workers) Serving(ctx context.Context, sess *ma.Session) (client, present bool, err error) {
	// Only self-hosted environments have workers.
	hosted, err := w.hosting.SelfHosted(ctx, sess.EnvironmentID)
	if err != nil {
		return false, true, err
	}
	if !hosted {
		return false, true, nil
	}
	client, err = w.st.SessionWorkAcked(ctx, sess.ID)
	if err != nil || !client {
		return false, true, err
	}
	it, err := w.st.OpenWorkForSession(ctx, sess.ID)
	if errors.Is(err, store.ErrNotFound) {
		return true, false, nil
	}
	if err != nil {
		return true, false, err
	}
	return true, it.State == store.WorkStarting || it.State == store.WorkActive, nil
}

// NeedWorker implements harness.WorkerHost.
func (w *workers) NeedWorker(ctx context.Context, sess *ma.Session) error {
	_, err := w.q.Enqueue(ctx, sess.EnvironmentID, sess.ID, sess.Metadata)
	return err
}

// WorkerArrived implements workqueue.Sessions.
func (w *workers) WorkerArrived(sessionID string) { w.h.Wake(sessionID) }

// WorkerLeft implements workqueue.Sessions.
func (w *workers) WorkerLeft(sessionID string) { w.h.Wake(sessionID) }
