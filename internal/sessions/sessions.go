// Package sessions is the one write path of sessions for the API: every
// change a client makes to a session goes through a Service, which
// validates it against the session's state read inside the store
// transaction that writes it, and after the commit tells everyone who needs
// to know (streams through the bus, the session's runner, the work queue of
// a self-hosted environment).
//
// The service lives outside the harness because it drives the harness (it
// wakes and interrupts runners) and the work queue; the harness's runner
// keeps its own write path (runner.update), which publishes after its
// commits, and the service's view of a session catches up with what the
// runner wrote from the log.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/workqueue"
	ma "github.com/reinsdev/reins/managedagents"
)

// maxViews bounds the sessions whose folded view is kept in memory.
const maxViews = 4096

// Runner is the part of the harness the service drives.
type Runner interface {
	// Wake makes sure a runner looks at the session soon.
	Wake(sessionID string)
	// Interrupt stops the session's current call; the user.interrupt is
	// already in the log.
	Interrupt(sessionID string)
}

// WorkQueue gives sessions of self-hosted environments a work item.
type WorkQueue interface {
	Enqueue(ctx context.Context, envID, sessionID string, meta map[string]string) (store.WorkItem, error)
}

// Config configures a Service. Store, Bus and Runner are required.
type Config struct {
	Store  store.Store
	Bus    *bus.Bus
	Runner Runner
	// Work, if set, gets a work item for each session of a self-hosted
	// environment that is created or gets new input.
	Work WorkQueue
	// Hosting tells self-hosted environments; nil makes one on Store.
	Hosting *Hosting
}

// Service changes sessions. It is safe for concurrent use.
type Service struct {
	cfg Config

	mu    sync.Mutex
	views map[string]view // session id -> its folded log, as committed
}

// view is a session's log folded into what it waits for, up to seq.
type view struct {
	seq  int64
	fold *harness.ActionFold // never fed after it is stored: Clone it
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Hosting == nil {
		cfg.Hosting = NewHosting(cfg.Store)
	}
	return &Service{cfg: cfg, views: make(map[string]view)}
}

// Hosting returns the service's rule for self-hosted environments.
func (s *Service) Hosting() *Hosting { return s.cfg.Hosting }

// RejectedError is input the session's state refuses: a 409 when Conflict
// (the session accepts no events at all), else a 400.
type RejectedError struct {
	Conflict bool
	Message  string
}

func (e *RejectedError) Error() string { return e.Message }

func rejected(format string, args ...any) error {
	return &RejectedError{Message: fmt.Sprintf(format, args...)}
}

// Record is called last in the transaction of a change a request makes,
// with the seq of the first event the change appended: what it writes
// (the outcome of a request made with an Idempotency-Key) is committed
// with the change or not at all, and an error from it rolls the change
// back and is returned as is. nil records nothing.
type Record func(tx store.Tx, first int64) error

// Create stores a new session with its initial events (user messages), then
// wakes its runner if it has input and gives it a work item if its
// environment is self-hosted. rec, if set, runs last in the transaction.
func (s *Service) Create(ctx context.Context, sess ma.Session, initial []ma.Event, rec Record) (ma.Session, error) {
	sess, err := s.cfg.Store.CreateSession(ctx, sess, func(tx store.Tx) error {
		for i := range initial {
			if err := tx.Append(&initial[i]); err != nil {
				return err
			}
		}
		if rec == nil {
			return nil
		}
		return rec(tx, 1)
	})
	if err != nil {
		return sess, err
	}
	if len(initial) > 0 {
		s.cfg.Runner.Wake(sess.ID)
	}
	return sess, s.enqueueWork(ctx, &sess)
}

// Update runs fn in one transaction on the session and, once it is
// committed, publishes the change to the session's streams. An error from
// fn is returned as is and nothing is written.
func (s *Service) Update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	sess, err := s.cfg.Store.UpdateSession(ctx, id, fn)
	if err != nil {
		return sess, err
	}
	s.cfg.Bus.Publish(id)
	return sess, nil
}

// Delete removes the session and its events, then tells its streams.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := s.cfg.Store.DeleteSession(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.views, id)
	s.mu.Unlock()
	s.cfg.Bus.Publish(id) // open streams notice and send session.deleted
	return nil
}

// Send appends client events to the session's log in one transaction and
// returns them as appended. Tool confirmations and results are checked
// against what the session waits for as read inside that transaction, so
// of two inputs for one tool use exactly one is accepted; the other gets a
// *RejectedError. After the commit the service publishes the events, wakes
// or interrupts the runner, and wakes a worker of a dormant self-hosted
// session that got new input. rec, if set, runs last in the transaction.
func (s *Service) Send(ctx context.Context, id string, evs []ma.Event, rec Record) ([]ma.Event, error) {
	var base view
	var client bool
	needView := needsView(evs)
	if needView {
		acked, err := s.cfg.Store.SessionWorkAcked(ctx, id)
		if err != nil {
			return nil, err
		}
		client = acked
		base = s.view(id)
	}
	var next view
	interrupt := false
	sess, err := s.cfg.Store.UpdateSession(ctx, id, func(tx store.Tx) error {
		var fold *harness.ActionFold
		if needView {
			var err error
			if fold, err = catchUp(tx, base, client); err != nil {
				return err
			}
		}
		first := tx.LastSeq() + 1
		var err error
		interrupt, err = accept(tx, fold, evs)
		if err != nil {
			return err
		}
		if fold != nil {
			next = view{seq: tx.LastSeq(), fold: fold}
		}
		if rec == nil {
			return nil
		}
		return rec(tx, first)
	})
	if err != nil {
		return nil, err
	}
	if next.fold != nil {
		s.remember(id, next)
	}
	s.cfg.Bus.Publish(id)
	if interrupt {
		s.cfg.Runner.Interrupt(id)
	} else {
		s.cfg.Runner.Wake(id)
	}
	for _, ev := range evs {
		if ev.Type == ma.EventUserMessage || ev.Type == ma.EventSystemMessage {
			// New input for a dormant self-hosted session wakes a worker.
			return evs, s.enqueueWork(ctx, &sess)
		}
	}
	return evs, nil
}

// needsView reports whether validating evs needs the session's state
// (plain messages do not).
func needsView(evs []ma.Event) bool {
	for _, ev := range evs {
		switch ev.Type {
		case ma.EventUserToolConfirmation, ma.EventUserCustomToolResult, ma.EventUserInterrupt, ma.EventUserToolResult, ma.EventSystemMessage:
			return true
		}
	}
	return false
}

// catchUp returns base's fold brought up to the transaction's last entry,
// as a copy: base itself is not changed. The fold is rebuilt from the
// whole log when there is none yet, or when it was folded in another
// client mode.
func catchUp(tx store.Tx, base view, client bool) (*harness.ActionFold, error) {
	var fold *harness.ActionFold
	after := base.seq
	if base.fold == nil || base.fold.Client() != client || base.seq > tx.LastSeq() {
		fold, after = harness.NewActionFold(client), 0
	} else {
		fold = base.fold.Clone()
	}
	entries, err := tx.ReadLog(after)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		fold.Feed(e.Event)
	}
	return fold, nil
}

// accept validates and appends evs in tx; fold, if set, is what the
// session waits for and is fed each accepted event. It reports whether an
// interrupt must stop the runner.
func accept(tx store.Tx, fold *harness.ActionFold, evs []ma.Event) (interrupt bool, err error) {
	sess := tx.Session()
	if sess.ArchivedAt != nil {
		return false, &RejectedError{Conflict: true, Message: fmt.Sprintf("session %s is archived; it accepts no events", sess.ID)}
	}
	if sess.Status == ma.StatusTerminated {
		return false, &RejectedError{Conflict: true, Message: fmt.Sprintf("session %s is terminated; it accepts no events", sess.ID)}
	}
	now := ma.Time(time.Now())
	for i := range evs {
		ev := &evs[i]
		var prev *ma.Event
		if i > 0 {
			prev = &evs[i-1]
		}
		stop, err := check(sess, fold, fmt.Sprintf("events[%d]", i), ev, prev, now)
		if err != nil {
			return false, err
		}
		interrupt = interrupt || stop
		if err := tx.Append(ev); err != nil {
			return false, err
		}
		if fold != nil {
			fold.Feed(*ev)
		}
	}
	return interrupt, nil
}

// check validates one event against what the session waits for and sets
// its processed_at when it is processed on receipt. It reports whether the
// event is an interrupt that must stop the runner.
func check(sess *ma.Session, fold *harness.ActionFold, f string, ev, prev *ma.Event, now string) (bool, error) {
	var a harness.Actions
	if fold != nil {
		a = fold.Actions()
	}
	switch ev.Type {
	case ma.EventUserToolConfirmation:
		if !a.Confirm[ev.ToolUseID] {
			return false, rejected("%s.tool_use_id: %s is not a tool use awaiting confirmation", f, ev.ToolUseID)
		}
		ev.ProcessedAt = &now
	case ma.EventUserToolResult:
		if !a.ToolResults[ev.ToolUseID] {
			return false, rejected("%s.tool_use_id: %s is not a tool use awaiting a result from a self-hosted worker", f, ev.ToolUseID)
		}
		ev.ProcessedAt = &now
	case ma.EventUserCustomToolResult:
		if !a.CustomResults[ev.CustomToolUseID] {
			return false, rejected("%s.custom_tool_use_id: %s is not a custom tool use awaiting a result", f, ev.CustomToolUseID)
		}
		ev.ProcessedAt = &now
	case ma.EventSystemMessage:
		// While the session waits on requires_action, a system message may
		// only trail a tool result.
		waiting := a.TurnActive && sess.Status != ma.StatusRunning
		if waiting && prev != nil && prev.Type == ma.EventUserMessage {
			return false, rejected("%s: the session is waiting for tool results (requires_action); a system.message is accepted only after a tool result", f)
		}
	case ma.EventUserInterrupt:
		if sess.Status == ma.StatusIdle && !a.TurnActive {
			ev.ProcessedAt = &now // no-op on an idle session
			return false, nil
		}
		return true, nil
	}
	return false, nil
}

// view returns the session's committed view (zero if none is kept).
func (s *Service) view(id string) view {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.views[id]
}

// remember keeps v as the session's view unless a later one is kept.
func (s *Service) remember(id string, v view) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.views[id]; ok && cur.seq >= v.seq {
		return
	}
	if _, ok := s.views[id]; !ok && len(s.views) >= maxViews {
		for k := range s.views { // evict one at random
			delete(s.views, k)
			break
		}
	}
	s.views[id] = v
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
