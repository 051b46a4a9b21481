package app

import (
	"context"
	"errors"

	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/workqueue"
	ma "github.com/reinsdev/reins/managedagents"
)

// workers links the work queue and the harness: it tells the harness which
// sessions pull workers serve (tool.WorkerHost), and wakes sessions when
// workers come and go (workqueue.Sessions).
type workers struct {
	st      store.Store
	q       *workqueue.Service
	h       sessions.Runner   // the harness, as the API drives it (replicas)
	hosting *sessions.Hosting // the one rule for "self-hosted"
	// placed reports whether an executor holds the session now.
	placed func(sessionID string) bool
}

// Serving implements tool.WorkerHost: a session is served by pull
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

// SessionIdle implements tool.WorkerHost: the queued item of a session
// that went idle retires (a worker that holds one stops it itself).
func (w *workers) SessionIdle(ctx context.Context, sess *ma.Session) error {
	if hosted, err := w.hosting.SelfHosted(ctx, sess.EnvironmentID); err != nil || !hosted {
		return err
	}
	_, err := w.q.Retire(ctx, sess.ID)
	return err
}

// ServedByExecutor implements workqueue.Sessions. The kind of hands is
// settled by whichever came first: a worker's acknowledgement (the session
// is then the workers' for good), or an executor holding the session or
// having answered one of its tool uses (agent.tool_result in the log).
func (w *workers) ServedByExecutor(ctx context.Context, sessionID string) (bool, error) {
	if acked, err := w.st.SessionWorkAcked(ctx, sessionID); err != nil || acked {
		return false, err
	}
	if w.placed != nil && w.placed(sessionID) {
		return true, nil
	}
	results, err := w.st.ListEvents(ctx, sessionID, store.EventQuery{Types: []string{ma.EventAgentToolResult}, Limit: 1})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return len(results) > 0, err
}

// NeedWorker implements tool.WorkerHost.
func (w *workers) NeedWorker(ctx context.Context, sess *ma.Session) error {
	_, err := w.q.Enqueue(ctx, sess.EnvironmentID, sess.ID, sess.Metadata)
	return err
}

// WorkerArrived implements workqueue.Sessions.
func (w *workers) WorkerArrived(sessionID string) { w.h.Wake(sessionID) }

// WorkerLeft implements workqueue.Sessions.
func (w *workers) WorkerLeft(sessionID string) { w.h.Wake(sessionID) }
