package app

import (
	"context"
	"errors"
	"sync"

	"github.com/reinsdev/reins/harness"
	"github.com/reinsdev/reins/internal/workqueue"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// workers links the work queue and the harness: it tells the harness which
// sessions pull workers serve (harness.WorkerHost), and wakes sessions when
// workers come and go (workqueue.Sessions).
type workers struct {
	st store.Store
	q  *workqueue.Service
	h  *harness.Harness

	mu         sync.Mutex
	selfHosted map[string]bool // environment id -> self-hosted, as first seen
}

// Serving implements harness.WorkerHost: a session is served by pull
// workers once one acknowledged its work; one is present while an item is
// acknowledged and its lease holds.
func (w *workers) Serving(ctx context.Context, sess *ma.Session) (client, present bool, err error) {
	// Only self-hosted environments have workers; the type of an
	// environment is remembered (an update cannot change it).
	w.mu.Lock()
	hosted, known := w.selfHosted[sess.EnvironmentID]
	w.mu.Unlock()
	if !known {
		env, err := w.st.GetEnvironment(ctx, sess.EnvironmentID)
		if errors.Is(err, store.ErrNotFound) {
			return false, true, nil
		}
		if err != nil {
			return false, true, err
		}
		hosted = env.CheckOutsideExecutors() == nil
		w.mu.Lock()
		if w.selfHosted == nil {
			w.selfHosted = map[string]bool{}
		}
		w.selfHosted[sess.EnvironmentID] = hosted
		w.mu.Unlock()
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
