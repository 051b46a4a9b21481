package toolhost

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
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
)

// withdrawTimeout bounds the withdrawal of a replica's announcement when
// it stops.
const withdrawTimeout = 5 * time.Second

// liveKey is the environment id every replica announces, executors or
// not, for as long as it runs: ReplicasWithHands(liveKey) lists the live
// replicas. No environment id has this form.
const liveKey = "*"

// agentKey is the key a replica announces for an environment whose
// sessions an agent end connected to it may serve (its environment key,
// or its machine's scope): ReplicasWithHands(agentKey(env)) lists the
// replicas an agent-end session of env can run its turns on. No
// environment id has this form.
func agentKey(envID string) string { return "agent:" + envID }

// handsKey is the bus key of a change of the executors of an environment
// at another replica.
func handsKey(envID string) string { return "hands:" + envID }

// replicaHands moves self-hosted sessions to the replica their executors
// are connected to, when several replicas share a database: each replica
// announces in the database the environments it has executors of, and a
// replica whose session needs hands it lacks hands the session's lease to
// one that announced them and wakes it there.
type replicaHands struct {
	st      handsStore
	bus     *bus.Bus
	hub     *executorhub.Hub
	replica string
	url     string        // where the other replicas reach this one (set before announce)
	ttl     time.Duration // of an announcement, and of a handed-over lease
	log     *slog.Logger

	writing sync.Mutex                    // held while the announcement is written
	mu      sync.Mutex                    // guards the fields below
	checked map[string]*executorhub.Lease // per cloud session: the placement whose workspace was checked
	leaving bool                          // the replica stops: it no longer announces liveKey
}

// write records the replica's announcement: the environments it has
// executors of, its URL, and liveKey until it starts leaving (its URL
// stays: the turns it still runs are served there). Writes are one at a
// time, so a renewal never brings liveKey back after leave.
func (r *replicaHands) write(ctx context.Context, envIDs []string) error {
	r.writing.Lock()
	defer r.writing.Unlock()
	envIDs = slices.Clip(envIDs)
	if r.url != "" {
		envIDs = append(envIDs, urlPrefix+r.url)
	}
	r.mu.Lock()
	if !r.leaving {
		envIDs = append(envIDs, liveKey)
	}
	r.mu.Unlock()
	return r.st.AnnounceHands(ctx, r.replica, envIDs, r.ttl)
}

// leave withdraws liveKey from the replica's announcement, before its
// sessions are handed over as it stops: no replica sends a cloud session
// back to the workspace it holds, which it is about to stop serving.
func (r *replicaHands) leave(ctx context.Context) {
	r.mu.Lock()
	r.leaving = true
	r.mu.Unlock()
	ids, _ := r.here(ctx)
	if err := r.write(ctx, ids); err != nil {
		r.log.Warn("withdraw this replica from the live ones", "err", err)
	}
}

// here returns what the replica announces besides liveKey: the
// environments it has executors of, and the agentKey of every environment
// an agent end connected to it serves; changed is closed at the next
// registration or departure of an executor. A machine whose scope cannot
// be read is left out (logged): the next renewal reads it again.
func (r *replicaHands) here(ctx context.Context) (keys []string, changed <-chan struct{}) {
	keys, changed = r.hub.Environments()
	keys = slices.Clone(keys)
	var scopes map[string][]string // machine -> environments, read once
	for _, e := range r.hub.Executors() {
		if !slices.Contains(e.Capabilities, executor.CapabilityAgent) {
			continue
		}
		if e.EnvironmentID != "" {
			keys = append(keys, agentKey(e.EnvironmentID))
		}
		if e.MachineID == "" {
			continue
		}
		if scopes == nil {
			var err error
			if scopes, err = r.machineScopes(ctx); err != nil {
				if ctx.Err() == nil {
					r.log.Warn("read the scopes of this replica's agent ends' machines", "err", err)
				}
				scopes = map[string][]string{}
			}
		}
		for _, env := range scopes[e.MachineID] {
			keys = append(keys, agentKey(env))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), changed
}

// machineScopes maps every live machine to the environments of its scope.
func (r *replicaHands) machineScopes(ctx context.Context) (map[string][]string, error) {
	ms, err := r.st.ListMachines(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(ms))
	for _, m := range ms {
		if m.RevokedAt == nil {
			out[m.ID] = m.EnvironmentIDs
		}
	}
	return out, nil
}

// announce keeps the replica's announcement current until ctx ends: at
// each registration or departure of an executor, and every ttl/3. Every
// environment that gains executors (or agent ends: its agentKey) here is
// told to the other replicas (a Changed note on handsKey), whose sessions
// waiting for an executor (an agent end) of it then look again. At the
// end the announcement is withdrawn.
func (r *replicaHands) announce(ctx context.Context) {
	renew := time.NewTicker(r.ttl / 3)
	defer renew.Stop()
	var told []string
	for {
		ids, changed := r.here(ctx)
		if err := r.write(ctx, ids); err != nil {
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
// executors of the environment (envID, or an agentKey for the agent ends
// of one), when this one has none, and wakes it there. It returns that
// replica, or "" when the session is to wait here: an executor of the
// environment is connected here (busy, or without a tool the session
// needs), no other replica has one, or the caller does not hold the
// session's lease. An error wrapping store.ErrFenced means the lease is
// no longer the caller's.
func (r *replicaHands) route(ctx context.Context, sessionID, envID string) (string, error) {
	if here, _ := r.here(ctx); slices.Contains(here, envID) {
		return "", nil
	}
	if _, ok := store.FenceFrom(ctx, sessionID); !ok {
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
	if moved, err := r.handOver(ctx, sessionID, to); !moved {
		return "", err
	}
	r.log.Debug("session handed over to the replica of its executors", "session", sessionID, "environment", envID, "to", to)
	return to, nil
}

// handOver passes the session's lease, which the caller holds (its fence
// is in ctx), to the replica to, and wakes the session there. It reports
// whether the session moved; an error wrapping store.ErrFenced means the
// lease is no longer the caller's. Other failures are logged: the session
// stays.
func (r *replicaHands) handOver(ctx context.Context, sessionID, to string) (bool, error) {
	fence, ok := store.FenceFrom(ctx, sessionID)
	if !ok {
		return false, nil
	}
	switch err := r.st.HandOverSession(ctx, sessionID, fence.Owner, fence.Token, to, r.ttl); {
	case errors.Is(err, store.ErrFenced):
		return false, err
	case err != nil:
		r.log.Warn("hand a session over to another replica", "session", sessionID, "to", to, "err", err)
		return false, nil
	}
	r.bus.Tell(bus.Note{Key: sessionID, Kind: bus.Wake, To: to})
	return true, nil
}

// noExecutor is Place's answer when no executor here can take a
// self-hosted session: with replicas, the session moves to one that has
// an executor of its environment (the runner, fenced off, leaves);
// otherwise it waits until an executor of the environment registers or
// frees a slot, here (changed) or at another replica.
func (t *Host) noExecutor(ctx context.Context, sessionID, envID string, changed <-chan struct{}) (*tool.Wait, error) {
	wait := &tool.Wait{C: changed, Reason: fmt.Sprintf("no executor of environment %s with room for this session is connected; the session's tools run when one is (reins executor)", envID)}
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
func (t *Host) either(local <-chan struct{}, sub *bus.Sub) <-chan struct{} {
	out := make(chan struct{})
	wait := func(ctx context.Context) {
		defer close(out)
		defer sub.Close()
		select {
		case <-local:
		case <-sub.C:
		case <-ctx.Done():
		}
	}
	if !t.life.Go(wait) {
		wait(t.life.Context()) // stopped: returns at once
	}
	return out
}

// Leave tells the other replicas this one is stopping (replicas only):
// call it before the sessions' runners leave.
func (t *Host) Leave(ctx context.Context) {
	if t.hands != nil {
		t.hands.leave(ctx)
	}
}

// Announce sets url, where the other replicas reach this one: from Start
// to Stop the host announces this replica's executors, and url (replicas
// only; call it before Start).
func (t *Host) Announce(url string) {
	if t.hands != nil {
		t.hands.url = url
	}
}
