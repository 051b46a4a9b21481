// Package workqueue runs the work queues of self-hosted environments: the
// pull-based protocol of the official environment workers (poll, ack,
// heartbeat, stop), lease expiry, and the link to the sessions they serve.
package workqueue

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/secret"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/store"
)

// NoHeartbeat is the expected_last_heartbeat of a lease's first heartbeat.
const NoHeartbeat = "NO_HEARTBEAT"

// Defaults.
const (
	DefaultTTL = 30 * time.Second
	MaxTTL     = 5 * time.Minute
	// DefaultReclaim is how long a claimed, unacknowledged item stays with
	// its worker before another poll may hand it out again.
	DefaultReclaim = 5 * time.Second
	// pollingWindow: workers seen polling within it count in the stats.
	pollingWindow = 30 * time.Second
)

// Errors the service returns; the HTTP layer maps them to statuses.
var (
	// ErrConflict: the item is not in a state that allows the call (409).
	ErrConflict = errors.New("workqueue: conflict")
	// ErrHeartbeatMismatch: expected_last_heartbeat is not the current
	// one (412).
	ErrHeartbeatMismatch = errors.New("workqueue: heartbeat precondition failed")
	// ErrExecutorServes: the session is served by an executor, so it has
	// no work for pull workers.
	ErrExecutorServes = errors.New("workqueue: an executor serves the session")
)

// HeartbeatMismatch carries the server's lease state with a 412.
type HeartbeatMismatch struct {
	State         string
	TTLSeconds    int64
	LastHeartbeat string
}

func (h *HeartbeatMismatch) Error() string {
	return fmt.Sprintf("expected_last_heartbeat does not match the lease's last heartbeat (state %s)", h.State)
}

func (h *HeartbeatMismatch) Unwrap() error { return ErrHeartbeatMismatch }

// Sessions is what the queue tells the harness about the sessions it
// serves.
type Sessions interface {
	// WorkerArrived: a worker acknowledged the session's item.
	WorkerArrived(sessionID string)
	// WorkerLeft: the session's lease lapsed or its item was stopped.
	WorkerLeft(sessionID string)
	// ServedByExecutor reports whether an executor serves the session's
	// built-in tools (it holds the session, or ran a tool of it). Such a
	// session is never offered to pull workers: a worker would run again
	// every tool use that has no user.tool_result.
	ServedByExecutor(ctx context.Context, sessionID string) (bool, error)
}

// Store is what the queue keeps in the database: its items (the store is
// one).
type Store interface {
	// CreateWork stores a new item; a second open item of a session is
	// store.ErrConflict.
	CreateWork(ctx context.Context, w store.WorkItem) error
	GetWork(ctx context.Context, environmentID, id string) (store.WorkItem, error)
	// UpdateWork changes an item in one transaction.
	UpdateWork(ctx context.Context, environmentID, id string, fn func(*store.WorkItem) error) (store.WorkItem, error)
	// ClaimWork hands the oldest claimable queued item to worker.
	ClaimWork(ctx context.Context, environmentID, worker string, now, reclaimBefore time.Time) (store.WorkItem, error)
	// OpenWorkForSession returns the session's open item, or
	// store.ErrNotFound.
	OpenWorkForSession(ctx context.Context, sessionID string) (store.WorkItem, error)
	// ExpiredWork returns the items whose lease expired before now.
	ExpiredWork(ctx context.Context, now time.Time) ([]store.WorkItem, error)
	WorkStats(ctx context.Context, environmentID string) (store.WorkStats, error)
	// CreateSessionToken stores the hash of a sessions token.
	CreateSessionToken(ctx context.Context, t store.SessionToken) error
}

// Service is the work queue of every self-hosted environment.
type Service struct {
	// TTL is the lease of an acknowledged item without a heartbeat, and
	// the default lease a heartbeat extends to (default 30 s).
	TTL time.Duration

	st       Store
	bus      *bus.Bus
	sessions Sessions
	log      *slog.Logger

	mu      sync.Mutex                      // guards polling
	polling map[string]map[string]time.Time // environment -> worker -> last poll
}

// New returns a Service; an Expiry puts the items whose lease lapsed back
// in the queue.
func New(st Store, b *bus.Bus, sessions Sessions, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{TTL: DefaultTTL, st: st, bus: b, sessions: sessions, log: log, polling: map[string]map[string]time.Time{}}
}

func queueKey(envID string) string { return "work:" + envID }

// Enqueue makes sure the session has an open work item, creating one when
// it is dormant (none open). The store allows one open item a session, so
// of concurrent calls one creates it and the others return it. It fails
// with ErrExecutorServes for a session an executor serves.
func (s *Service) Enqueue(ctx context.Context, envID, sessionID string, meta map[string]string) (store.WorkItem, error) {
	if w, err := s.st.OpenWorkForSession(ctx, sessionID); err == nil {
		return w, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return w, err
	}
	if served, err := s.sessions.ServedByExecutor(ctx, sessionID); err != nil || served {
		if err == nil {
			err = fmt.Errorf("%w: session %s", ErrExecutorServes, sessionID)
		}
		return store.WorkItem{}, err
	}
	if meta == nil {
		meta = map[string]string{}
	}
	w := store.WorkItem{ID: ids.New("work_"), EnvironmentID: envID, SessionID: sessionID, State: store.WorkQueued, Metadata: meta, CreatedAt: time.Now().UTC()}
	if err := s.st.CreateWork(ctx, w); errors.Is(err, store.ErrConflict) {
		// Another call opened one since we looked.
		if open, oerr := s.st.OpenWorkForSession(ctx, sessionID); oerr == nil {
			return open, nil
		}
		return w, err
	} else if err != nil {
		return w, err
	}
	s.bus.Publish(queueKey(envID))
	return w, nil
}

// Claim is an item a poll handed out, with its work secret.
type Claim struct {
	store.WorkItem
	// Secret is the item's work secret, as the official workers read it:
	// URL-safe base64 (no padding) of the JSON object {"sessions_token":
	// "reins_st_…"}. The sessions token is new at each hand-out and
	// stored by hash only; the workers use it as their credential for
	// the item's work (its session, the item, the session's memory
	// stores).
	Secret string
}

// workSecret is the JSON object a work secret encodes.
type workSecret struct {
	SessionsToken string `json:"sessions_token"`
}

// Poll hands out the oldest available item, waiting up to block for one,
// with a new sessions token in its secret; nil when there is none. keyID
// is the environment key that polls ("" for another credential): its
// revocation ends the token.
func (s *Service) Poll(ctx context.Context, envID, worker, keyID string, block, reclaim time.Duration) (*Claim, error) {
	s.seen(envID, worker)
	var sub *bus.Sub
	var deadline <-chan time.Time
	if block > 0 {
		sub = s.bus.Subscribe(queueKey(envID))
		defer sub.Close()
		t := time.NewTimer(block)
		defer t.Stop()
		deadline = t.C
	}
	for {
		now := time.Now().UTC()
		w, err := s.st.ClaimWork(ctx, envID, worker, now, now.Add(-reclaim))
		if err == nil {
			served, err := s.sessions.ServedByExecutor(ctx, w.SessionID)
			if err != nil {
				return nil, err
			}
			if !served {
				sec, err := s.issueSecret(ctx, w, keyID)
				if err != nil {
					return nil, err
				}
				return &Claim{WorkItem: w, Secret: sec}, nil
			}
			// An item enqueued before an executor took the session.
			if _, err := s.Retire(ctx, w.SessionID); err != nil {
				return nil, err
			}
			continue
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if sub == nil {
			return nil, nil
		}
		select {
		case <-sub.C:
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// issueSecret makes the secret of a hand-out of w to a poll with the
// environment key keyID: a new sessions token for w's session, whose hash
// it stores.
func (s *Service) issueSecret(ctx context.Context, w store.WorkItem, keyID string) (string, error) {
	token, hash := secret.New(secret.SessionsTokenPrefix)
	err := s.st.CreateSessionToken(ctx, store.SessionToken{Hash: hash, SessionID: w.SessionID, WorkID: w.ID,
		EnvironmentID: w.EnvironmentID, EnvironmentKeyID: keyID, CreatedAt: time.Now().UTC()})
	if err != nil {
		return "", fmt.Errorf("issue the sessions token of work %s: %w", w.ID, err)
	}
	payload, err := json.Marshal(workSecret{SessionsToken: token})
	if err != nil {
		return "", fmt.Errorf("encode the secret of work %s: %w", w.ID, err)
	}
	return base64.RawURLEncoding.EncodeToString(payload), nil
}

func (s *Service) seen(envID, worker string) {
	if worker == "" {
		worker = "(anonymous)"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.polling[envID]
	if m == nil {
		m = map[string]time.Time{}
		s.polling[envID] = m
	}
	now := time.Now()
	m[worker] = now
	for w, t := range m {
		if now.Sub(t) > pollingWindow {
			delete(m, w)
		}
	}
}

// Ack moves a queued item to starting and starts its lease. The item of a
// session an executor serves is retired instead (ErrConflict).
func (s *Service) Ack(ctx context.Context, envID, id string) (store.WorkItem, error) {
	cur, err := s.st.GetWork(ctx, envID, id)
	if err != nil {
		return cur, err
	}
	if served, err := s.sessions.ServedByExecutor(ctx, cur.SessionID); err != nil {
		return cur, err
	} else if served {
		if _, err := s.Retire(ctx, cur.SessionID); err != nil {
			return cur, err
		}
		return cur, fmt.Errorf("%w: work %s was retired: an executor serves session %s", ErrConflict, cur.ID, cur.SessionID)
	}
	w, err := s.st.UpdateWork(ctx, envID, id, func(w *store.WorkItem) error {
		if w.State != store.WorkQueued {
			return fmt.Errorf("%w: work %s is %s; only queued work can be acknowledged", ErrConflict, w.ID, w.State)
		}
		now := time.Now().UTC()
		exp := now.Add(s.TTL)
		w.State, w.AcknowledgedAt, w.LeaseExpiresAt, w.TTLSeconds = store.WorkStarting, &now, &exp, int64(s.TTL/time.Second)
		w.LastHeartbeat, w.LatestHeartbeatAt, w.StartedAt = "", nil, nil
		return nil
	})
	if err == nil {
		s.sessions.WorkerArrived(w.SessionID)
	}
	return w, err
}

// HeartbeatResult is the answer to a heartbeat.
type HeartbeatResult struct {
	LastHeartbeat string
	LeaseExtended bool
	State         string
	TTLSeconds    int64
}

// Heartbeat extends an item's lease. expected must be the previous
// heartbeat's token (NoHeartbeat for the first).
func (s *Service) Heartbeat(ctx context.Context, envID, id, expected string, desiredTTL time.Duration) (HeartbeatResult, error) {
	var res HeartbeatResult
	_, err := s.st.UpdateWork(ctx, envID, id, func(w *store.WorkItem) error {
		cur := w.LastHeartbeat
		if cur == "" {
			cur = NoHeartbeat
		}
		// A holder whose lease lapsed (the item went back to the queue)
		// gets the precondition failure, like any stale heartbeat.
		if expected != cur {
			return &HeartbeatMismatch{State: w.State, TTLSeconds: w.TTLSeconds, LastHeartbeat: cur}
		}
		if w.State == store.WorkQueued {
			return fmt.Errorf("%w: work %s is queued; acknowledge it before heartbeating", ErrConflict, w.ID)
		}
		now := time.Now().UTC()
		if w.State == store.WorkStopped {
			res = HeartbeatResult{LastHeartbeat: cur, State: w.State, TTLSeconds: w.TTLSeconds}
			return nil
		}
		ttl := s.TTL
		if desiredTTL > 0 {
			ttl = min(max(desiredTTL, time.Second), MaxTTL)
		}
		if w.State == store.WorkStarting {
			w.State, w.StartedAt = store.WorkActive, &now
		}
		exp := now.Add(ttl)
		w.LastHeartbeat = strconv.FormatInt(now.UnixNano(), 10)
		w.LatestHeartbeatAt, w.LeaseExpiresAt, w.TTLSeconds = &now, &exp, int64(ttl/time.Second)
		res = HeartbeatResult{LastHeartbeat: w.LastHeartbeat, LeaseExtended: w.State == store.WorkActive, State: w.State, TTLSeconds: w.TTLSeconds}
		return nil
	})
	return res, err
}

// Stop stops an item: gracefully (stopping: the worker finishes and stops
// it) or by force (stopped at once).
func (s *Service) Stop(ctx context.Context, envID, id string, force bool) (store.WorkItem, error) {
	w, err := s.st.UpdateWork(ctx, envID, id, func(w *store.WorkItem) error {
		if w.State == store.WorkStopped {
			return fmt.Errorf("%w: work %s is already stopped", ErrConflict, w.ID)
		}
		now := time.Now().UTC()
		if w.StopRequestedAt == nil {
			w.StopRequestedAt = &now
		}
		if force || w.State == store.WorkQueued {
			w.State, w.StoppedAt, w.LeaseExpiresAt = store.WorkStopped, &now, nil
		} else {
			w.State = store.WorkStopping
		}
		return nil
	})
	if err == nil && w.State == store.WorkStopped {
		s.sessions.WorkerLeft(w.SessionID)
	}
	return w, err
}

// Retire stops the session's open item if no worker acknowledged it (it
// is queued): the session went idle, or an executor serves it. It reports
// whether a worker holds the item instead (it is then left alone).
func (s *Service) Retire(ctx context.Context, sessionID string) (acked bool, err error) {
	open, err := s.st.OpenWorkForSession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	w, err := s.st.UpdateWork(ctx, open.EnvironmentID, open.ID, func(w *store.WorkItem) error {
		if w.State != store.WorkQueued {
			acked = w.State != store.WorkStopped
			return errNoChange
		}
		now := time.Now().UTC()
		w.State, w.StopRequestedAt, w.StoppedAt, w.LeaseExpiresAt = store.WorkStopped, &now, &now, nil
		return nil
	})
	if errors.Is(err, errNoChange) {
		return acked, nil
	}
	if err != nil {
		return false, err
	}
	s.log.Debug("work retired", "work", w.ID, "session", sessionID)
	return false, nil
}

// errNoChange leaves an item as it is in UpdateWork.
var errNoChange = errors.New("no change")

// Stats returns an environment's queue figures and the number of workers
// that polled in the last 30 s.
func (s *Service) Stats(ctx context.Context, envID string) (store.WorkStats, int, error) {
	st, err := s.st.WorkStats(ctx, envID)
	s.mu.Lock()
	n := 0
	for _, t := range s.polling[envID] {
		if time.Since(t) <= pollingWindow {
			n++
		}
	}
	s.mu.Unlock()
	return st, n, err
}

// DefaultExpiryInterval is Expiry.Interval's default.
const DefaultExpiryInterval = time.Second

// Expiry is a service that runs a queue's lease expiry (Service.Expire)
// every Interval from Start to Stop.
type Expiry struct {
	Queue    *Service
	Interval time.Duration // default DefaultExpiryInterval

	life service.Base // owns the loop
}

// Start starts the loop.
func (e *Expiry) Start(ctx context.Context) error {
	if _, err := e.life.Begin(ctx); err != nil {
		return err
	}
	e.life.Go(e.run)
	return nil
}

// Stop ends the loop and waits for it until ctx ends.
func (e *Expiry) Stop(ctx context.Context) error { return e.life.Halt(ctx) }

func (e *Expiry) run(ctx context.Context) {
	t := time.NewTicker(cmp.Or(e.Interval, DefaultExpiryInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Queue.Expire(ctx)
		}
	}
}

// Expire puts the items whose lease lapsed back in the queue.
func (s *Service) Expire(ctx context.Context) {
	now := time.Now().UTC()
	items, err := s.st.ExpiredWork(ctx, now)
	if err != nil {
		s.log.Error("work lease expiry", "err", err)
		return
	}
	for _, it := range items {
		w, err := s.st.UpdateWork(ctx, it.EnvironmentID, it.ID, func(w *store.WorkItem) error {
			if w.LeaseExpiresAt == nil || !w.LeaseExpiresAt.Before(now) {
				return ErrConflict // renewed meanwhile
			}
			if w.State == store.WorkStopping {
				w.State, w.StoppedAt, w.LeaseExpiresAt = store.WorkStopped, &now, nil
				return nil
			}
			w.State, w.ClaimedAt, w.ClaimedBy = store.WorkQueued, nil, ""
			w.AcknowledgedAt, w.StartedAt, w.LeaseExpiresAt = nil, nil, nil
			w.LastHeartbeat, w.LatestHeartbeatAt = "", nil
			return nil
		})
		if err != nil {
			continue
		}
		s.log.Warn("work lease lapsed", "work", w.ID, "session", w.SessionID, "state", w.State)
		s.bus.Publish(queueKey(w.EnvironmentID))
		s.sessions.WorkerLeft(w.SessionID)
	}
}
