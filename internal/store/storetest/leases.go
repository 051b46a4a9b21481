package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// appendMessage appends a user message to the session with ctx (and so
// with ctx's fence, if any).
func appendMessage(ctx context.Context, s store.Store, sessionID string) error {
	_, err := s.UpdateSession(ctx, sessionID, func(tx store.Tx) error {
		return tx.Append(&ma.Event{Type: ma.EventAgentMessage, ProcessedAt: new(now())})
	})
	return err
}

// testLeases checks acquisition, renewal, release and takeover of session
// leases, and that the token grows at every acquisition.
func testLeases(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	const ttl = time.Minute
	if _, err := s.AcquireSession(ctx, "sesn_missing", "a", ttl); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("acquire a missing session: %v", err)
	}
	if l, err := s.SessionLease(ctx, sess.ID); err != nil || l != (store.Lease{}) {
		t.Fatalf("lease before any acquisition = %+v, %v", l, err)
	}
	t1, err := s.AcquireSession(ctx, sess.ID, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.SessionLease(ctx, sess.ID)
	if err != nil || l.Owner != "a" || l.Token != t1 || !l.Live || time.Until(l.Until) < ttl/2 {
		t.Fatalf("lease after acquisition = %+v, %v", l, err)
	}
	_, err = s.AcquireSession(ctx, sess.ID, "b", ttl)
	var held *store.LeaseHeldError
	if !errors.Is(err, store.ErrLeaseHeld) || !errors.As(err, &held) || held.Owner != "a" || !held.Until.Equal(l.Until) {
		t.Fatalf("acquire a held lease: %v", err)
	}
	// The owner acquires again: a new token, which fences the old one.
	t2, err := s.AcquireSession(ctx, sess.ID, "a", ttl)
	if err != nil || t2 <= t1 {
		t.Fatalf("re-acquire by the owner: token %d after %d, %v", t2, t1, err)
	}
	if err := s.RenewSession(ctx, sess.ID, "a", t1, ttl); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("renew with a superseded token: %v", err)
	}
	if err := s.RenewSession(ctx, sess.ID, "b", t2, ttl); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("renew by another owner: %v", err)
	}
	if err := s.RenewSession(ctx, sess.ID, "a", t2, ttl); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseSession(ctx, sess.ID, "a", t1); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("release with a superseded token: %v", err)
	}
	if err := s.ReleaseSession(ctx, sess.ID, "a", t2); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.SessionLease(ctx, sess.ID); l.Live || l.Owner != "" || l.Token != t2 {
		t.Fatalf("lease after release = %+v", l)
	}
	if err := s.RenewSession(ctx, sess.ID, "a", t2, ttl); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("renew a released lease: %v", err)
	}
	// Released: another owner takes it at once, with a larger token.
	t3, err := s.AcquireSession(ctx, sess.ID, "b", ttl)
	if err != nil || t3 <= t2 {
		t.Fatalf("acquire a released lease: token %d after %d, %v", t3, t2, err)
	}
	// Deleting the session deletes its lease.
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if l, err := s.SessionLease(ctx, sess.ID); err != nil || l != (store.Lease{}) {
		t.Fatalf("lease of a deleted session = %+v, %v", l, err)
	}
}

// testLeaseExpiry checks that an expired lease is taken over by another
// owner, and that the old owner can then neither renew nor write.
func testLeaseExpiry(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	const short = 300 * time.Millisecond
	ta, err := s.AcquireSession(ctx, sess.ID, "a", short)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSession(ctx, sess.ID, "b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("acquire a live lease: %v", err)
	}
	// Expired but not taken over: the owner may still renew.
	time.Sleep(short + 100*time.Millisecond)
	if l, _ := s.SessionLease(ctx, sess.ID); l.Live {
		t.Fatalf("lease still live after its ttl: %+v", l)
	}
	if err := s.RenewSession(ctx, sess.ID, "a", ta, short); err != nil {
		t.Fatalf("renew an expired lease nobody took: %v", err)
	}
	time.Sleep(short + 100*time.Millisecond)
	tb, err := s.AcquireSession(ctx, sess.ID, "b", time.Minute)
	if err != nil || tb <= ta {
		t.Fatalf("take over an expired lease: token %d after %d, %v", tb, ta, err)
	}
	if err := s.RenewSession(ctx, sess.ID, "a", ta, time.Minute); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("renew after a takeover: %v", err)
	}
	stale := store.WithFence(ctx, store.Fence{SessionID: sess.ID, Owner: "a", Token: ta})
	if err := appendMessage(stale, s, sess.ID); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write of the stale owner: %v", err)
	}
	if err := appendMessage(store.WithFence(ctx, store.Fence{SessionID: sess.ID, Owner: "b", Token: tb}), s, sess.ID); err != nil {
		t.Fatalf("write of the new owner: %v", err)
	}
}

// testFencedWrites checks which writes a fence lets through: the current
// owner's, unfenced ones (the API's), and those of other sessions; and that
// a refused write writes nothing.
func testFencedWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s, "agent_a")
	b := newSession(t, s, "agent_a")
	never := store.WithFence(ctx, store.Fence{SessionID: a.ID, Owner: "x", Token: 1})
	if err := appendMessage(never, s, a.ID); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("fenced write of a session never leased: %v", err)
	}
	t1, err := s.AcquireSession(ctx, a.ID, "x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	owner := store.WithFence(ctx, store.Fence{SessionID: a.ID, Owner: "x", Token: t1})
	if err := appendMessage(owner, s, a.ID); err != nil {
		t.Fatalf("write of the owner: %v", err)
	}
	if err := appendMessage(owner, s, b.ID); err != nil {
		t.Fatalf("a fence for a does not apply to b: %v", err)
	}
	if err := appendMessage(ctx, s, a.ID); err != nil {
		t.Fatalf("unfenced write: %v", err)
	}
	before, _ := s.LastSeq(ctx, a.ID)
	if _, err := s.AcquireSession(ctx, a.ID, "x", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := appendMessage(owner, s, a.ID); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write with a superseded token: %v", err)
	}
	if after, _ := s.LastSeq(ctx, a.ID); after != before {
		t.Fatalf("a fenced write appended: last seq %d, was %d", after, before)
	}
}

// testUnownedSessions checks the sessions a sweep takes over: with work and
// without a live lease.
func testUnownedSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	setStatus := func(id, status string) {
		t.Helper()
		if _, err := s.UpdateSession(ctx, id, func(tx store.Tx) error {
			tx.Session().Status = status
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	idle := newSession(t, s, "agent_a")
	running := newSession(t, s, "agent_a")
	setStatus(running.ID, ma.StatusRunning)
	queued := newSession(t, s, "agent_a")
	if _, err := s.UpdateSession(ctx, queued.ID, func(tx store.Tx) error {
		return tx.Append(&ma.Event{Type: ma.EventUserMessage})
	}); err != nil {
		t.Fatal(err)
	}
	over := newSession(t, s, "agent_a")
	if _, err := s.UpdateSession(ctx, over.ID, func(tx store.Tx) error {
		tx.Session().Status = ma.StatusTerminated
		return tx.Append(&ma.Event{Type: ma.EventUserMessage})
	}); err != nil {
		t.Fatal(err)
	}
	unowned := func(owner ...string) []string {
		t.Helper()
		ids, err := s.UnownedSessions(ctx, strings.Join(owner, ""))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}
	want := []string{running.ID, queued.ID}
	slices.Sort(want)
	if got := unowned(); !slices.Equal(got, want) {
		t.Fatalf("unowned = %v, want %v (idle %s, terminated %s)", got, want, idle.ID, over.ID)
	}
	tok, err := s.AcquireSession(ctx, running.ID, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := unowned(); !slices.Equal(got, []string{queued.ID}) {
		t.Fatalf("unowned with running leased = %v", got)
	}
	if got := unowned("a"); !slices.Equal(got, want) {
		t.Fatalf("unowned but by a = %v, want %v", got, want)
	}
	if got := unowned("b"); !slices.Equal(got, []string{queued.ID}) {
		t.Fatalf("unowned but by b = %v", got)
	}
	if err := s.ReleaseSession(ctx, running.ID, "a", tok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSession(ctx, queued.ID, "a", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := unowned(); !slices.Equal(got, want) {
		t.Fatalf("unowned after a release and an expiry = %v, want %v", got, want)
	}
}

// testConcurrentAcquire checks that of owners racing for a free lease
// exactly one gets it.
func testConcurrentAcquire(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.AcquireSession(ctx, sess.ID, fmt.Sprint("owner", i), time.Minute)
			errs <- err
		}()
	}
	won := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrLeaseHeld):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d owners acquired one lease", won)
	}
}
