package toolhost

import (
	"context"
	"errors"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Workers links the work queue and the harness: it tells the harness which
// sessions pull workers serve (tool.WorkerHost), and wakes sessions when
// workers come and go (workqueue.Sessions). Set every field before use;
// Placed may stay nil.
type Workers struct {
	Store WorkerStore
	Queue WorkQueue
	// Runner is the harness, as the API drives it (replicas).
	Runner interface{ Wake(sessionID string) }
	// Hosting is the one rule for "self-hosted" (sessions.Hosting).
	Hosting interface {
		SelfHosted(ctx context.Context, envID string) (bool, error)
	}
	// Placed reports whether an executor holds the session now
	// (Host.Placed).
	Placed func(sessionID string) bool
}

// WorkerStore is what Workers reads: a session's work and its tool
// results.
type WorkerStore interface {
	SessionWorkAcked(ctx context.Context, sessionID string) (bool, error)
	OpenWorkForSession(ctx context.Context, sessionID string) (store.WorkItem, error)
	ListEvents(ctx context.Context, sessionID string, q store.EventQuery) ([]store.Entry, error)
}

// WorkQueue is the work queue as Workers uses it (workqueue.Service).
type WorkQueue interface {
	workRetirer
	Enqueue(ctx context.Context, envID, sessionID string, meta map[string]string) (store.WorkItem, error)
}

// Serving implements tool.WorkerHost: a session is served by pull
// workers once one acknowledged its work; one is present while an item is
// acknowledged and its lease holds.
func (w *Workers) Serving(ctx context.Context, sess *ma.Session) (client, present bool, err error) {
	// Only self-hosted environments have workers.
	hosted, err := w.Hosting.SelfHosted(ctx, sess.EnvironmentID)
	if err != nil {
		return false, true, err
	}
	if !hosted {
		return false, true, nil
	}
	client, err = w.Store.SessionWorkAcked(ctx, sess.ID)
	if err != nil || !client {
		return false, true, err
	}
	it, err := w.Store.OpenWorkForSession(ctx, sess.ID)
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
func (w *Workers) SessionIdle(ctx context.Context, sess *ma.Session) error {
	if hosted, err := w.Hosting.SelfHosted(ctx, sess.EnvironmentID); err != nil || !hosted {
		return err
	}
	_, err := w.Queue.Retire(ctx, sess.ID)
	return err
}

// ServedByExecutor implements workqueue.Sessions. The kind of hands is
// settled by whichever came first: a worker's acknowledgement (the session
// is then the workers' for good), or an executor holding the session or
// having answered one of its tool uses (agent.tool_result in the log).
func (w *Workers) ServedByExecutor(ctx context.Context, sessionID string) (bool, error) {
	if acked, err := w.Store.SessionWorkAcked(ctx, sessionID); err != nil || acked {
		return false, err
	}
	if w.Placed != nil && w.Placed(sessionID) {
		return true, nil
	}
	results, err := w.Store.ListEvents(ctx, sessionID, store.EventQuery{Types: []string{ma.EventAgentToolResult}, Limit: 1})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return len(results) > 0, err
}

// NeedWorker implements tool.WorkerHost.
func (w *Workers) NeedWorker(ctx context.Context, sess *ma.Session) error {
	_, err := w.Queue.Enqueue(ctx, sess.EnvironmentID, sess.ID, sess.Metadata)
	return err
}

// WorkerArrived implements workqueue.Sessions.
func (w *Workers) WorkerArrived(sessionID string) { w.Runner.Wake(sessionID) }

// WorkerLeft implements workqueue.Sessions.
func (w *Workers) WorkerLeft(sessionID string) { w.Runner.Wake(sessionID) }
