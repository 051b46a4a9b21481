package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

func testWork(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC()
	a := store.WorkItem{ID: "work_a", EnvironmentID: "env_1", SessionID: "sesn_a", State: store.WorkQueued, CreatedAt: now}
	b := store.WorkItem{ID: "work_b", EnvironmentID: "env_1", SessionID: "sesn_b", State: store.WorkQueued, CreatedAt: now.Add(time.Millisecond)}
	other := store.WorkItem{ID: "work_o", EnvironmentID: "env_9", SessionID: "sesn_o", State: store.WorkQueued, CreatedAt: now.Add(-time.Second)}
	for _, w := range []store.WorkItem{a, b, other} {
		if err := s.CreateWork(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.WorkStats(ctx, "env_1")
	if err != nil || st.Depth != 2 || st.Pending != 0 || st.OldestQueuedAt == nil {
		t.Fatalf("stats %+v %v", st, err)
	}
	all, err := s.AllWorkStats(ctx)
	if err != nil || all.Depth != 3 || all.OldestQueuedAt == nil || !all.OldestQueuedAt.Before(a.CreatedAt.Add(-time.Second/2)) {
		t.Fatalf("stats of every queue %+v %v (oldest created %v)", all, err, other.CreatedAt)
	}
	// Claims hand out the oldest unclaimed item; a claim is reclaimable
	// after the reclaim window.
	c1, err := s.ClaimWork(ctx, "env_1", "w1", now, now.Add(-5*time.Second))
	if err != nil || c1.ID != "work_a" || c1.ClaimedBy != "w1" {
		t.Fatalf("first claim %+v %v", c1, err)
	}
	c2, err := s.ClaimWork(ctx, "env_1", "w2", now, now.Add(-5*time.Second))
	if err != nil || c2.ID != "work_b" {
		t.Fatalf("second claim %+v %v", c2, err)
	}
	if _, err := s.ClaimWork(ctx, "env_1", "w3", now, now.Add(-5*time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("third claim: %v", err)
	}
	later := now.Add(10 * time.Second)
	if c, err := s.ClaimWork(ctx, "env_1", "w3", later, later.Add(-5*time.Second)); err != nil || c.ID != "work_a" {
		t.Fatalf("reclaim %+v %v", c, err)
	}
	if _, err := s.ClaimWork(ctx, "env_2", "w1", now, now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other environment: %v", err)
	}
	// Ack and lease.
	exp := now.Add(time.Second)
	acked, err := s.UpdateWork(ctx, "env_1", "work_a", func(w *store.WorkItem) error {
		w.State, w.AcknowledgedAt, w.LeaseExpiresAt = store.WorkStarting, &now, &exp
		return nil
	})
	if err != nil || acked.State != store.WorkStarting {
		t.Fatal(err)
	}
	if ok, _ := s.SessionWorkAcked(ctx, "sesn_a"); !ok {
		t.Fatal("SessionWorkAcked false after ack")
	}
	if ok, _ := s.SessionWorkAcked(ctx, "sesn_b"); ok {
		t.Fatal("SessionWorkAcked true for an unacknowledged session")
	}
	expired, err := s.ExpiredWork(ctx, now.Add(2*time.Second))
	if err != nil || len(expired) != 1 || expired[0].ID != "work_a" {
		t.Fatalf("expired %+v %v", expired, err)
	}
	// Requeued after expiry, the session still counts as acknowledged once.
	if _, err := s.UpdateWork(ctx, "env_1", "work_a", func(w *store.WorkItem) error {
		w.State, w.AcknowledgedAt, w.LeaseExpiresAt = store.WorkQueued, nil, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.SessionWorkAcked(ctx, "sesn_a"); !ok {
		t.Fatal("SessionWorkAcked forgot the acknowledgement")
	}
	open, err := s.OpenWorkForSession(ctx, "sesn_a")
	if err != nil || open.ID != "work_a" {
		t.Fatalf("open work %+v %v", open, err)
	}
	if _, err := s.UpdateWork(ctx, "env_1", "work_a", func(w *store.WorkItem) error { w.State = store.WorkStopped; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenWorkForSession(ctx, "sesn_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("stopped work still open: %v", err)
	}
	if _, err := s.GetWork(ctx, "env_2", "work_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("work through another environment: %v", err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateWork(ctx, "env_1", "work_b", func(*store.WorkItem) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	list, err := s.ListWork(ctx, "env_1", store.ListQuery{Limit: 10})
	if err != nil || len(list) != 2 || list[0].Value.ID != "work_a" {
		t.Fatalf("list %+v %v", list, err)
	}
}

// testOneOpenWork: a session has at most one open (not stopped) work item,
// whoever creates them and however concurrently.
func testOneOpenWork(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateWork(ctx, store.WorkItem{ID: fmt.Sprintf("work_%d", i), EnvironmentID: "env_1", SessionID: "sesn_1", State: store.WorkQueued, CreatedAt: time.Now()})
		})
	}
	wg.Wait()
	created := winners(t, errs, store.ErrConflict)
	list, err := s.ListWork(ctx, "env_1", store.ListQuery{Limit: 100})
	if err != nil || created != 1 || len(list) != 1 {
		t.Fatalf("%d creates succeeded, %d items listed (%v); want 1", created, len(list), err)
	}
	open, err := s.OpenWorkForSession(ctx, "sesn_1")
	if err != nil || open.ID != list[0].Value.ID {
		t.Fatalf("open work %+v %v", open, err)
	}
	// Once it is stopped the session may have a new one; other sessions
	// are not affected.
	if _, err := s.UpdateWork(ctx, "env_1", open.ID, func(w *store.WorkItem) error { w.State = store.WorkStopped; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, w := range []store.WorkItem{
		{ID: "work_next", EnvironmentID: "env_1", SessionID: "sesn_1", State: store.WorkQueued, CreatedAt: time.Now()},
		{ID: "work_other", EnvironmentID: "env_1", SessionID: "sesn_2", State: store.WorkQueued, CreatedAt: time.Now()},
	} {
		if err := s.CreateWork(ctx, w); err != nil {
			t.Fatalf("create %s: %v", w.ID, err)
		}
	}
}

// CheckOneOpenWork checks that the session's open work item is open and that
// each of stopped is stopped, in its state and its stored body. Backends
// use it after migrating a database that had duplicates.
func CheckOneOpenWork(t *testing.T, s store.Store, environmentID, sessionID, open string, stopped ...string) {
	t.Helper()
	ctx := context.Background()
	w, err := s.OpenWorkForSession(ctx, sessionID)
	if err != nil || w.ID != open {
		t.Fatalf("open work of %s: %+v %v; want %s", sessionID, w, err, open)
	}
	for _, id := range stopped {
		if w, err := s.GetWork(ctx, environmentID, id); err != nil || w.State != store.WorkStopped {
			t.Fatalf("work %s: %+v %v; want stopped", id, w, err)
		}
	}
}
