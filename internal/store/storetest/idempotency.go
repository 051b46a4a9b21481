package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// testIdempotency checks the outcomes of requests made with an
// Idempotency-Key: one recorded with the session it creates comes back
// as recorded; of concurrent changes recording one key exactly one
// commits, the others roll back whole with ErrKeyRecorded; keys are per
// scope; a record older than since is not found and may be replaced;
// ForgetOutcomes deletes the old ones, and deleting a session deletes
// its records.
func testIdempotency(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	since := now.Add(-time.Hour)
	created := store.IdempotentOutcome{Scope: "ak:1", Key: "create-1", RequestHash: "h1", Status: 200, Response: []byte(`{"id":"x"}`), CreatedAt: now}
	sess := ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: "env_x",
		Agent: ma.SessionAgent{ID: "agent_a", Version: 1}, CreatedAt: ma.Time(now), UpdatedAt: ma.Time(now), Metadata: ma.Metadata{}}
	if _, err := s.CreateSession(ctx, sess, func(tx store.Tx) error { return tx.RecordOutcome(created, since) }); err != nil {
		t.Fatal(err)
	}
	got, err := s.IdempotentOutcome(ctx, "ak:1", "create-1", since)
	created.SessionID = sess.ID
	if err != nil || !sameOutcome(got, created) {
		t.Fatalf("recorded with its session: %+v, %v; want %+v", got, err, created)
	}
	if _, err := s.IdempotentOutcome(ctx, "ak:2", "create-1", since); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the key in another scope: %v, want ErrNotFound", err)
	}
	if _, err := s.IdempotentOutcome(ctx, "ak:1", "create-1", now.Add(time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a record older than since: %v, want ErrNotFound", err)
	}

	sent := store.IdempotentOutcome{Scope: "ak:1", Key: "send-1", RequestHash: "h2", Status: 200, FirstSeq: 1, LastSeq: 1, CreatedAt: now}
	won := concurrentSends(t, s, sess.ID, sent, since)
	if won != 1 {
		t.Fatalf("%d concurrent changes recording one key committed, want 1", won)
	}
	entries, err := s.ReadLog(ctx, sess.ID, 0, 100)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the log after the concurrent changes: %d entries, %v; want the winner's 1", len(entries), err)
	}
	sent.SessionID = sess.ID
	if got, err := s.IdempotentOutcome(ctx, "ak:1", "send-1", since); err != nil || !sameOutcome(got, sent) {
		t.Fatalf("a send's record: %+v, %v; want %+v", got, err, sent)
	}
	other := sent
	other.Scope = "ak:2"
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.RecordOutcome(other, since) }); err != nil {
		t.Fatalf("the same key in another scope: %v", err)
	}

	// A record older than since is replaced.
	later := now.Add(2 * time.Hour)
	again := store.IdempotentOutcome{Scope: "ak:1", Key: "create-1", RequestHash: "h3", Status: 200, Response: []byte(`{"id":"y"}`), CreatedAt: later}
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.RecordOutcome(again, later.Add(-time.Hour)) }); err != nil {
		t.Fatalf("replacing an aged-out record: %v", err)
	}
	again.SessionID = sess.ID
	if got, err := s.IdempotentOutcome(ctx, "ak:1", "create-1", later.Add(-time.Hour)); err != nil || !sameOutcome(got, again) {
		t.Fatalf("the replaced record: %+v, %v", got, err)
	}
	if n, err := s.ForgetOutcomes(ctx, now.Add(time.Minute)); err != nil || n != 2 {
		t.Fatalf("ForgetOutcomes: %d, %v; want the 2 records made at %v", n, err, now)
	}
	if _, err := s.IdempotentOutcome(ctx, "ak:1", "send-1", since); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a forgotten record: %v", err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IdempotentOutcome(ctx, "ak:1", "create-1", since); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted session's record: %v", err)
	}
}

// concurrentSends runs changes of the session at once, each appending an
// event and recording o; it returns how many committed. The others must
// fail with ErrKeyRecorded.
func concurrentSends(t *testing.T, s store.Store, sessionID string, o store.IdempotentOutcome, since time.Time) int {
	t.Helper()
	const parallel = 8
	var wg sync.WaitGroup
	errs := make([]error, parallel)
	for i := range parallel {
		wg.Go(func() {
			_, errs[i] = s.UpdateSession(context.Background(), sessionID, func(tx store.Tx) error {
				if err := tx.Append(&ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "once"}}}); err != nil {
					return err
				}
				return tx.RecordOutcome(o, since)
			})
		})
	}
	wg.Wait()
	return winners(t, errs, store.ErrKeyRecorded)
}

// winners counts the concurrent changes that committed (no error); the
// others must have failed with lost.
func winners(t *testing.T, errs []error, lost error) int {
	t.Helper()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, lost):
			t.Errorf("change %d: %v, want %v", i, err, lost)
		}
	}
	return won
}

// testIdempotentCreates checks the outcomes CreateAgent and
// CreateEnvironment record with store.WithOutcome: of concurrent creates
// recording one key exactly one commits, the others create nothing and
// fail with ErrKeyRecorded; the record comes back as recorded.
func testIdempotentCreates(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	since := now.Add(-time.Hour)
	o := store.IdempotentOutcome{Scope: "ak:1", Key: "env-1", RequestHash: "h", Status: 200, Response: []byte(`{"env":1}`), CreatedAt: now}
	const parallel = 8
	var wg sync.WaitGroup
	errs := make([]error, parallel)
	for i := range parallel {
		wg.Go(func() {
			e := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: fmt.Sprintf("env %d", i), Metadata: ma.Metadata{}, CreatedAt: ma.Time(now)}
			errs[i] = s.CreateEnvironment(store.WithOutcome(ctx, o, since), e)
		})
	}
	wg.Wait()
	won := winners(t, errs, store.ErrKeyRecorded)
	envs, err := s.ListEnvironments(ctx, store.ListQuery{Limit: 100})
	if err != nil || won != 1 || len(envs) != 1 {
		t.Fatalf("%d of %d concurrent creates with one key committed, %d environments (%v); want 1 and 1", won, parallel, len(envs), err)
	}
	if got, err := s.IdempotentOutcome(ctx, "ak:1", "env-1", since); err != nil || !sameOutcome(got, o) {
		t.Fatalf("the environment's record: %+v, %v", got, err)
	}

	a := newAgent("kept")
	ao := store.IdempotentOutcome{Scope: "ak:1", Key: "agent-1", RequestHash: "h", Status: 200, Response: []byte(`{"agent":1}`), CreatedAt: now}
	if err := s.CreateAgent(store.WithOutcome(ctx, ao, since), a); err != nil {
		t.Fatal(err)
	}
	b := newAgent("again")
	if err := s.CreateAgent(store.WithOutcome(ctx, ao, since), b); !errors.Is(err, store.ErrKeyRecorded) {
		t.Fatalf("a second agent with the key: %v, want ErrKeyRecorded", err)
	}
	if _, err := s.GetAgent(ctx, b.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the agent whose record failed: %v, want ErrNotFound", err)
	}
	if got, err := s.IdempotentOutcome(ctx, "ak:1", "agent-1", since); err != nil || !sameOutcome(got, ao) {
		t.Fatalf("the agent's record: %+v, %v", got, err)
	}
}

func sameOutcome(a, b store.IdempotentOutcome) bool {
	return a.Scope == b.Scope && a.Key == b.Key && a.RequestHash == b.RequestHash && a.SessionID == b.SessionID && a.Status == b.Status &&
		string(a.Response) == string(b.Response) && (a.Response == nil) == (b.Response == nil) &&
		a.FirstSeq == b.FirstSeq && a.LastSeq == b.LastSeq && a.CreatedAt.Equal(b.CreatedAt)
}
