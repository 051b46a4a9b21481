package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reinsdev/reins/store"
)

func testWork(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC()
	a := store.WorkItem{ID: "work_a", EnvironmentID: "env_1", SessionID: "sesn_a", State: store.WorkQueued, CreatedAt: now}
	b := store.WorkItem{ID: "work_b", EnvironmentID: "env_1", SessionID: "sesn_b", State: store.WorkQueued, CreatedAt: now.Add(time.Millisecond)}
	for _, w := range []store.WorkItem{a, b} {
		if err := s.CreateWork(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.WorkStats(ctx, "env_1")
	if err != nil || st.Depth != 2 || st.Pending != 0 || st.OldestQueuedAt == nil {
		t.Fatalf("stats %+v %v", st, err)
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
