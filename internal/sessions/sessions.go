// Package sessions is the one write path of sessions: every change a
// client makes to a session goes through a typed operation of a Service
// (Create, Patch, AddResource, RemoveResource, Send, Archive, Delete),
// which holds that operation's rules, validates the change against the
// session's state read inside the store transaction that writes it, and
// after the commit tells everyone who needs to know (streams through the
// bus, the session's runner, the work queue of a self-hosted environment).
// The harness's runner writes through a Writer, with its own guard.
//
// The service lives outside the harness because it drives the harness (it
// wakes and interrupts runners) and the work queue; it imports neither:
// what a session waits for is folded by internal/awaiting, which both use.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"github.com/reinsdev/reins/internal/pricing"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/workqueue"
	ma "github.com/reinsdev/reins/managedagents"
)

// Runner is the part of the harness the service drives.
type Runner interface {
	// Wake makes sure a runner looks at the session soon.
	Wake(sessionID string)
	// Interrupt stops the current call of the session's thread threadID
	// ("" for the primary thread, which stops every thread's); the
	// user.interrupt is already in the log.
	Interrupt(sessionID, threadID string)
}

// WorkQueue gives sessions of self-hosted environments a work item.
type WorkQueue interface {
	Enqueue(ctx context.Context, envID, sessionID string, meta map[string]string) (store.WorkItem, error)
}

// Store is what the service needs of the store. A store.Store is one.
type Store interface {
	Updater
	EnvironmentReader
	CreateSession(ctx context.Context, s ma.Session, fn func(store.Tx) error) (ma.Session, error)
	GetSession(ctx context.Context, id string) (ma.Session, error)
	DeleteSession(ctx context.Context, id string) error
	ReadLog(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error)
	SessionWorkAcked(ctx context.Context, sessionID string) (bool, error)
	GetVault(ctx context.Context, id string) (ma.Vault, error)
}

// Config configures a Service. Store, Bus and Runner are required.
type Config struct {
	Store  Store
	Bus    *bus.Bus
	Runner Runner
	// Work, if set, gets a work item for each session of a self-hosted
	// environment that is created or gets new input.
	Work WorkQueue
	// Hosting tells self-hosted environments; nil makes one on Store.
	Hosting *Hosting
	// Writer is the runners' write path, shared with the harness; nil
	// makes one on Store.
	Writer *Writer
	// Prices prices what sessions consume (nil prices nothing: no
	// session can have a budget).
	Prices *pricing.Table
	// GraderModel is the outcome grader's model ("": the session's).
	GraderModel string
}

// Service changes sessions. It is safe for concurrent use.
type Service struct {
	cfg Config

	mu    sync.Mutex      // guards the field below
	views map[string]view // session id -> its folded log, as committed
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Hosting == nil {
		cfg.Hosting = NewHosting(cfg.Store)
	}
	if cfg.Writer == nil {
		cfg.Writer = NewWriter(cfg.Store)
	}
	return &Service{cfg: cfg, views: make(map[string]view)}
}

// Hosting returns the service's rule for self-hosted environments.
func (s *Service) Hosting() *Hosting { return s.cfg.Hosting }

// Writer returns the runners' write path.
func (s *Service) Writer() *Writer { return s.cfg.Writer }

// RejectedError is a change the session's rules or state refuse: a 409
// when Conflict (the session's state refuses it; retrying will not help),
// a 404 when NotFound (a part of the session it names does not exist),
// else a 400.
type RejectedError struct {
	Conflict bool
	NotFound bool
	Message  string
}

func (e *RejectedError) Error() string { return e.Message }

func rejected(format string, args ...any) error {
	return &RejectedError{Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &RejectedError{Conflict: true, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &RejectedError{NotFound: true, Message: fmt.Sprintf(format, args...)}
}

// Record is called last in the transaction of a change a request makes,
// with the seq of the first event the change appended: what it writes
// (the outcome of a request made with an Idempotency-Key) is committed
// with the change or not at all, and an error from it rolls the change
// back and is returned as is. nil records nothing.
type Record func(tx store.Tx, first int64) error

// update runs fn in one transaction on the session and, once it is
// committed, publishes the change to the session's streams.
func (s *Service) update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	sess, err := s.cfg.Writer.Update(ctx, id, fn)
	if err != nil {
		return sess, err
	}
	s.cfg.Bus.Publish(id)
	return sess, nil
}

// Archive makes the session read-only; archiving an archived session
// changes nothing. A running session cannot be archived.
func (s *Service) Archive(ctx context.Context, id string) (ma.Session, error) {
	return s.update(ctx, id, func(tx store.Tx) error {
		cur := tx.Session()
		if cur.ArchivedAt != nil {
			return nil
		}
		if cur.Status == ma.StatusRunning {
			return rejected("cannot archive session %s while it is running; interrupt it or wait until it is idle", cur.ID)
		}
		now := ma.Time(time.Now())
		cur.ArchivedAt = &now
		cur.UpdatedAt = now
		return nil
	})
}

// Delete removes the session and its events, then tells its streams. A
// running session cannot be deleted. It returns the session as it was.
func (s *Service) Delete(ctx context.Context, id string) (ma.Session, error) {
	sess, err := s.cfg.Store.GetSession(ctx, id)
	if err != nil {
		return sess, err
	}
	if sess.Status == ma.StatusRunning {
		return sess, rejected("cannot delete session %s while it is running; interrupt it or wait until it is idle", id)
	}
	if err := s.cfg.Store.DeleteSession(ctx, id); err != nil {
		return sess, err
	}
	s.mu.Lock()
	delete(s.views, id)
	s.mu.Unlock()
	s.cfg.Bus.Publish(id) // open streams notice and send session.deleted
	return sess, nil
}

// enqueueWork gives a session of a self-hosted environment an open work
// item.
func (s *Service) enqueueWork(ctx context.Context, sess *ma.Session) error {
	if s.cfg.Work == nil {
		return nil
	}
	hosted, err := s.cfg.Hosting.SelfHosted(ctx, sess.EnvironmentID)
	if err != nil || !hosted {
		return err
	}
	_, err = s.cfg.Work.Enqueue(ctx, sess.EnvironmentID, sess.ID, sess.Metadata)
	if errors.Is(err, workqueue.ErrExecutorServes) {
		return nil // its executor serves it
	}
	return err
}
