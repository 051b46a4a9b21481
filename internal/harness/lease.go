package harness

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/reinsdev/reins/backoff"
	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/store"
)

// errLeaseLost is the cause of a runner context cancelled because its
// session's lease was lost.
var errLeaseLost = errors.New("session lease lost")

// releaseTimeout bounds the release of a lease by a runner that leaves.
const releaseTimeout = 5 * time.Second

// own takes r's session's lease when the harness runs sessions under
// leases. It returns the runner's context, which carries the fence of
// every write and is cancelled as soon as the lease is lost, and the
// function that stops renewing and releases the lease when the runner
// leaves. When leave released the lease and handOver (nil: false) reports
// that the session still has work, the other replicas are told to take
// it at once. ok is false when the lease cannot be had (another replica
// holds it: that replica gets the wake-ups).
func (h *Harness) own(r *runner) (ctx context.Context, leave func(handOver func() bool), ok bool) {
	if h.cfg.Leases == nil {
		return h.ctx, func(func() bool) {}, true
	}
	token, err := h.acquire(r.id)
	switch {
	case errors.Is(err, store.ErrLeaseHeld):
		h.log.Debug("session runs elsewhere", "session", r.id, "err", err)
		return nil, nil, false
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, false
	case err != nil:
		if h.ctx.Err() == nil {
			h.log.Warn("acquire session lease; the sweep retries", "session", r.id, "err", err)
		}
		return nil, nil, false
	}
	f := store.Fence{SessionID: r.id, Owner: h.cfg.Owner, Token: token}
	ctx, cancel := context.WithCancelCause(store.WithFence(h.ctx, f))
	k := &keeper{h: h, fence: f, cancel: cancel, deadline: time.Now().Add(h.cfg.LeaseTTL)}
	h.renewer.add(k)
	var once sync.Once
	return ctx, func(handOver func() bool) {
		once.Do(func() {
			lost := h.renewer.remove(k)
			cancel(nil)
			if !lost && k.release() && handOver != nil && handOver() {
				h.log.Debug("session handed over to the other replicas", "session", r.id)
				h.cfg.Bus.Tell(bus.Note{Key: r.id, Kind: bus.Wake})
			}
		})
	}, true
}

// leaseTaker is a store.Leases whose acquisition also returns the lease it
// replaced (the SQL stores are).
type leaseTaker interface {
	TakeSession(ctx context.Context, sessionID, owner string, ttl time.Duration) (token int64, prev store.Lease, err error)
}

// acquire acquires the session's lease and reports a takeover to the
// observer: the lease was not released by its last owner, another one or
// this one, and had expired.
func (h *Harness) acquire(sessionID string) (int64, error) {
	lt, ok := h.cfg.Leases.(leaseTaker)
	if !ok {
		return h.cfg.Leases.AcquireSession(h.ctx, sessionID, h.cfg.Owner, h.cfg.LeaseTTL)
	}
	token, prev, err := lt.TakeSession(h.ctx, sessionID, h.cfg.Owner, h.cfg.LeaseTTL)
	if err == nil && prev.Owner != "" && (prev.Owner != h.cfg.Owner || !prev.Live) {
		h.log.Info("took over a session's lease", "session", sessionID, "from", prev.Owner, "expired_at", prev.Until)
		h.obs.LeaseTakeover(sessionID, prev.Owner)
	}
	return token, err
}

// keeper is a lease the renewer keeps.
type keeper struct {
	h      *Harness
	fence  store.Fence
	cancel context.CancelCauseFunc // the runner's context
	// deadline is when the lease expires unless renewed: a whole TTL
	// after the start of its last renewal (or its acquisition).
	deadline time.Time
}

// renewer renews the leases of all the harness's runners every TTL/3, in
// one batch (store.Leases.RenewSessions: a few statements for thousands
// of sessions, where a statement per session was most of a database's
// capacity at scale; see docs/scale.md). A lease fenced off, or not
// renewed for a whole TTL (another replica may have taken it over), is
// lost: its runner's context is cancelled at once.
type renewer struct {
	h       *Harness
	mu      sync.Mutex         // guards keepers, lost and expired
	keepers map[string]*keeper // by session
	lost    map[*keeper]bool
	// expired is set when a lease was lost because it could not be
	// renewed (the database away) rather than taken over: the renewer
	// reclaims this replica's sessions as soon as the database answers.
	expired bool
	stopped chan struct{} // closed when run returns
}

func newRenewer(h *Harness) *renewer {
	return &renewer{h: h, keepers: map[string]*keeper{}, lost: map[*keeper]bool{}, stopped: make(chan struct{})}
}

// add starts renewing k's lease.
func (rn *renewer) add(k *keeper) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.keepers[k.fence.SessionID] = k
}

// remove stops renewing k's lease and reports whether it was lost. A
// renewal in flight may still extend it; the release that follows, or the
// next acquisition, fences it off all the same.
func (rn *renewer) remove(k *keeper) (lost bool) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.keepers[k.fence.SessionID] == k {
		delete(rn.keepers, k.fence.SessionID)
	}
	lost = rn.lost[k]
	delete(rn.lost, k)
	return lost
}

// run renews the leases every TTL/3 until the harness stops, and
// reclaims the sessions of leases lost to an outage as soon as it ends.
func (rn *renewer) run() {
	defer close(rn.stopped)
	t := time.NewTicker(rn.h.cfg.LeaseTTL / 3)
	defer t.Stop()
	attempt := 0
	for {
		var reclaim <-chan time.Time
		if rn.hasExpired() {
			attempt++
			reclaim = time.After(reclaimBackoff.Delay(attempt))
		}
		select {
		case <-rn.h.ctx.Done():
			return
		case <-t.C:
			rn.renew()
		case <-reclaim:
			if rn.reclaim() {
				attempt = 0
			}
		}
	}
}

// reclaimBackoff paces the renewer's attempts to reclaim the sessions of
// leases lost to an outage: at most a second after the database is back.
var reclaimBackoff = backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second}

func (rn *renewer) hasExpired() bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.expired
}

// reclaim wakes the sessions with work that no other replica owns, this
// replica's expired leases included, and reports whether the database
// answered. Each wake-up acquires the lease anew (a larger token: what a
// runner of the old lease still writes is fenced off).
func (rn *renewer) reclaim() bool {
	if err := rn.h.wakeUnowned(rn.h.ctx, rn.h.cfg.Owner); err != nil {
		return false
	}
	rn.mu.Lock()
	rn.expired = false
	rn.mu.Unlock()
	rn.h.log.Info("database back: the sessions whose leases expired meanwhile are taken again")
	return true
}

// renew renews every lease kept now, in one batch.
func (rn *renewer) renew() {
	rn.mu.Lock()
	ks := make([]*keeper, 0, len(rn.keepers))
	fences := make([]store.Fence, 0, len(rn.keepers))
	for _, k := range rn.keepers {
		ks = append(ks, k)
		fences = append(fences, k.fence)
	}
	rn.mu.Unlock()
	if len(ks) == 0 {
		return
	}
	start := time.Now()
	fenced, err := rn.h.cfg.Leases.RenewSessions(rn.h.ctx, rn.h.cfg.Owner, fences, rn.h.cfg.LeaseTTL)
	if err != nil && rn.h.ctx.Err() != nil {
		return
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	for _, k := range ks {
		switch {
		case rn.keepers[k.fence.SessionID] != k:
			// Its runner left meanwhile.
		case err == nil && !slices.Contains(fenced, k.fence.SessionID):
			k.deadline = start.Add(rn.h.cfg.LeaseTTL)
		case err == nil:
			rn.h.log.Warn("session lease taken over; its runner stops", "session", k.fence.SessionID, "token", k.fence.Token)
			rn.loseLocked(k)
		case time.Now().Before(k.deadline):
			rn.h.log.Warn("renew session lease", "session", k.fence.SessionID, "err", err)
		default:
			rn.h.log.Warn("session lease expired unrenewed; its runner stops until the database is back", "session", k.fence.SessionID, "err", err)
			rn.loseLocked(k)
			rn.expired = true
		}
	}
}

// loseLocked stops renewing k's lease and cancels its runner's context.
func (rn *renewer) loseLocked(k *keeper) {
	delete(rn.keepers, k.fence.SessionID)
	rn.lost[k] = true
	k.cancel(errLeaseLost)
}

// release frees a lease still held, so that another replica may take the
// session at once, and reports whether it did.
func (k *keeper) release() bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.h.ctx), releaseTimeout)
	defer cancel()
	err := k.h.cfg.Leases.ReleaseSession(ctx, k.fence.SessionID, k.fence.Owner, k.fence.Token)
	if err != nil && !errors.Is(err, store.ErrFenced) {
		k.h.log.Warn("release session lease", "session", k.fence.SessionID, "err", err)
	}
	return err == nil
}

// sweep wakes, every TTL/2, the sessions with work that have no runner
// here and (under leases) no live lease of another replica: sessions of
// a replica that died, sessions whose wake-up was lost, and sessions
// whose runner stopped (the database failing even to record the failure)
// are taken again this way, without a restart.
func (h *Harness) sweep() {
	t := time.NewTicker(h.cfg.LeaseTTL / 2)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.draining:
			return
		case <-t.C:
		}
		if err := h.wakeOrphans(h.ctx); err != nil && h.ctx.Err() == nil {
			h.log.Warn("sweep sessions left without a runner", "err", err)
		}
	}
}

// wakeUnowned wakes the sessions with work and no live lease but owner's
// that have no runner here. With owner this replica, that takes back
// at once the sessions whose runner left without releasing its lease (the
// database was away) instead of after the lease expired: the new runner's
// acquisition bumps the token, fencing off the old one.
func (h *Harness) wakeUnowned(ctx context.Context, owner string) error {
	ids, err := h.cfg.Leases.UnownedSessions(ctx, owner)
	if err != nil {
		return err
	}
	h.wakeIdle(ids)
	return nil
}

// CatchUp looks again at everything a lost wake-up may have concerned: it
// signals every runner of this process and wakes the sessions with work
// that no replica owns. Call it after the wake-ups from other replicas
// were cut off (a reconnect of their transport).
func (h *Harness) CatchUp(ctx context.Context) error {
	h.mu.Lock()
	for _, r := range h.runners {
		r.signal()
	}
	h.mu.Unlock()
	if h.cfg.Leases == nil {
		return nil
	}
	return h.wakeUnowned(ctx, h.cfg.Owner)
}
