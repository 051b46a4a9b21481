package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/store"
)

// withdrawTimeout bounds the withdrawal of a replica's announcement when
// it stops.
const withdrawTimeout = 5 * time.Second

// handsKey is the bus key of a change of the executors of an environment
// at another replica.
func handsKey(envID string) string { return "hands:" + envID }

// replicaHands moves self-hosted sessions to the replica their executors
// are connected to, when several replicas share a database: each replica
// announces in the database the environments it has executors of, and a
// replica whose session needs hands it lacks hands the session's lease to
// one that announced them and wakes it there.
type replicaHands struct {
	st      store.Store
	bus     *bus.Bus
	hub     *executor.Hub
	replica string
	ttl     time.Duration // of an announcement, and of a handed-over lease
	log     *slog.Logger

	mu      sync.Mutex
	checked map[string]*executor.Lease // per cloud session: the placement whose workspace was checked
}

// announce keeps the replica's announcement current until ctx ends: at
// each registration or departure of an executor, and every ttl/3. Every
// environment that gains executors here is told to the other replicas
// (a Changed note on handsKey), whose sessions waiting for an executor of
// it then look again. At the end the announcement is withdrawn.
func (r *replicaHands) announce(ctx context.Context) {
	renew := time.NewTicker(r.ttl / 3)
	defer renew.Stop()
	var told []string
	for {
		ids, changed := r.hub.Environments()
		if err := r.st.AnnounceHands(ctx, r.replica, ids, r.ttl); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("announce this replica's executors", "err", err)
			}
		} else {
			for _, id := range ids {
				if !slices.Contains(told, id) {
					r.bus.Tell(bus.Note{Key: handsKey(id), Kind: bus.Changed})
				}
			}
			told = ids
		}
		select {
		case <-changed:
		case <-renew.C:
		case <-ctx.Done():
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
			defer cancel()
			if err := r.st.AnnounceHands(wctx, r.replica, nil, r.ttl); err != nil {
				r.log.Warn("withdraw this replica's executors", "err", err)
			}
			return
		}
	}
}

// route hands the session over to another replica that announced
// executors of the environment, when this one has none, and wakes it
// there. It returns that replica, or "" when the session is to wait here:
// an executor of the environment is connected here (busy, or without a
// tool the session needs), no other replica has one, or the caller does
// not hold the session's lease. An error wrapping store.ErrFenced means
// the lease is no longer the caller's.
func (r *replicaHands) route(ctx context.Context, sessionID, envID string) (string, error) {
	if here, _ := r.hub.Environments(); slices.Contains(here, envID) {
		return "", nil
	}
	fence, ok := store.FenceFrom(ctx, sessionID)
	if !ok {
		return "", nil
	}
	there, err := r.st.ReplicasWithHands(ctx, envID)
	if err != nil {
		r.log.Warn("look for executors at other replicas", "environment", envID, "err", err)
		return "", nil
	}
	there = slices.DeleteFunc(there, func(id string) bool { return id == r.replica })
	if len(there) == 0 {
		return "", nil
	}
	to := there[rand.IntN(len(there))]
	switch err := r.st.HandOverSession(ctx, sessionID, fence.Owner, fence.Token, to, r.ttl); {
	case errors.Is(err, store.ErrFenced):
		return "", err
	case err != nil:
		r.log.Warn("hand a session over to the replica of its executors", "session", sessionID, "to", to, "err", err)
		return "", nil
	}
	r.bus.Tell(bus.Note{Key: sessionID, Kind: bus.Wake, To: to})
	r.log.Debug("session handed over to the replica of its executors", "session", sessionID, "environment", envID, "to", to)
	return to, nil
}

// noExecutor is Place's answer when no executor here can take a
// self-hosted session: with replicas, the session moves to one that has
// an executor of its environment (the runner, fenced off, leaves);
// otherwise it waits until an executor of the environment registers or
// frees a slot, here (changed) or at another replica.
func (t *hubTools) noExecutor(ctx context.Context, sessionID, envID string, changed <-chan struct{}) (*harness.Wait, error) {
	wait := &harness.Wait{C: changed, Reason: fmt.Sprintf("no executor of environment %s with room for this session is connected; the session's tools run when one is (reins executor)", envID)}
	if t.hands == nil {
		return wait, nil
	}
	// Subscribed before the database is read: an announcement made after
	// the read is not missed.
	sub := t.hands.bus.Subscribe(handsKey(envID))
	to, err := t.hands.route(ctx, sessionID, envID)
	if err != nil || to != "" {
		sub.Close()
		if err == nil {
			err = fmt.Errorf("the session moved to replica %s, where an executor of environment %s is connected: %w", to, envID, store.ErrFenced)
		}
		return nil, err
	}
	wait.C = t.either(changed, sub)
	return wait, nil
}

// either returns a channel closed when local is closed, sub receives, or
// the tools stop; it closes sub then.
func (t *hubTools) either(local <-chan struct{}, sub *bus.Sub) <-chan struct{} {
	out := make(chan struct{})
	t.wg.Go(func() {
		defer close(out)
		defer sub.Close()
		select {
		case <-local:
		case <-sub.C:
		case <-t.ctx.Done():
		}
	})
	return out
}

// startHands starts announcing this replica's executors (replicas only).
func (t *hubTools) startHands() {
	if t.hands == nil {
		return
	}
	t.wg.Go(func() { t.hands.announce(t.ctx) })
}
