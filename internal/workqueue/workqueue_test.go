package workqueue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/secret"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sessions records the queue's notifications.
type sessions struct {
	mu            sync.Mutex // guards the fields below
	arrived, left []string
	executor      map[string]bool // sessions an executor serves
}

func (s *sessions) ServedByExecutor(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executor[id], nil
}

func (s *sessions) setExecutor(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.executor == nil {
		s.executor = map[string]bool{}
	}
	s.executor[id] = true
}

func (s *sessions) WorkerArrived(id string) {
	s.mu.Lock()
	s.arrived = append(s.arrived, id)
	s.mu.Unlock()
}
func (s *sessions) WorkerLeft(id string) { s.mu.Lock(); s.left = append(s.left, id); s.mu.Unlock() }

func newService(t *testing.T) (*Service, *sessions, store.Store) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ss := &sessions{}
	return New(st, bus.New(), ss, nil), ss, st
}

func TestLeaseLapsesAfterTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, ss, st := newService(t)
		q.TTL = 10 * time.Second
		expiry := &Expiry{Queue: q, Interval: time.Second}
		if err := expiry.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer expiry.Stop(ctx)
		w, err := q.Enqueue(ctx, "env_1", "sesn_1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := q.Enqueue(ctx, "env_1", "sesn_1", nil); again.ID != w.ID {
			t.Fatal("a session with open work got a second item")
		}
		if got, err := q.Poll(ctx, "env_1", "worker-a", "", 0, DefaultReclaim); err != nil || got == nil || got.ID != w.ID {
			t.Fatalf("poll: %+v %v", got, err)
		}
		if _, err := q.Ack(ctx, "env_1", w.ID); err != nil {
			t.Fatal(err)
		}
		hb, err := q.Heartbeat(ctx, "env_1", w.ID, NoHeartbeat, 0)
		if err != nil || hb.State != store.WorkActive || !hb.LeaseExtended || hb.TTLSeconds != 10 {
			t.Fatalf("heartbeat %+v %v", hb, err)
		}
		// Heartbeats every 5 s keep the lease.
		for range 4 {
			time.Sleep(5 * time.Second)
			if hb, err = q.Heartbeat(ctx, "env_1", w.ID, hb.LastHeartbeat, 0); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if cur, _ := st.GetWork(ctx, "env_1", w.ID); cur.State != store.WorkActive {
			t.Fatalf("state %s while heartbeating", cur.State)
		}
		// Silence for longer than the TTL: back in the queue.
		time.Sleep(12 * time.Second)
		synctest.Wait()
		cur, _ := st.GetWork(ctx, "env_1", w.ID)
		if cur.State != store.WorkQueued || cur.LastHeartbeat != "" || cur.AcknowledgedAt != nil {
			t.Fatalf("after the lease lapsed: %+v", cur)
		}
		ss.mu.Lock()
		left := ss.left
		ss.mu.Unlock()
		if len(left) != 1 || left[0] != "sesn_1" {
			t.Fatalf("WorkerLeft calls %v", left)
		}
		// The old holder's heartbeat is refused with the lease state.
		var hm *HeartbeatMismatch
		if _, err := q.Heartbeat(ctx, "env_1", w.ID, hb.LastHeartbeat, 0); !errors.As(err, &hm) {
			t.Fatalf("stale heartbeat: %v", err)
		}
		// Another worker takes it.
		if got, err := q.Poll(ctx, "env_1", "worker-b", "", 0, DefaultReclaim); err != nil || got == nil || got.ClaimedBy != "worker-b" {
			t.Fatalf("second poll: %+v %v", got, err)
		}
	})
}

func TestLongPollWakesOnEnqueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, _, _ := newService(t)
		got := make(chan *Claim, 1)
		go func() {
			w, _ := q.Poll(ctx, "env_1", "w", "", 900*time.Millisecond, DefaultReclaim)
			got <- w
		}()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		w, err := q.Enqueue(ctx, "env_1", "sesn_1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := <-got; p == nil || p.ID != w.ID {
			t.Fatalf("long poll got %+v", p)
		}
		// An empty long poll answers nil after block.
		start := time.Now()
		if p, err := q.Poll(ctx, "env_1", "w", "", 900*time.Millisecond, DefaultReclaim); p != nil || err != nil || time.Since(start) != 900*time.Millisecond {
			t.Fatalf("empty poll: %+v %v after %s", p, err, time.Since(start))
		}
	})
}

func TestStopStates(t *testing.T) {
	ctx := context.Background()
	q, ss, _ := newService(t)
	w, _ := q.Enqueue(ctx, "env_1", "sesn_1", nil)
	q.Ack(ctx, "env_1", w.ID)
	if got, err := q.Stop(ctx, "env_1", w.ID, false); err != nil || got.State != store.WorkStopping {
		t.Fatalf("graceful stop: %+v %v", got, err)
	}
	hb, err := q.Heartbeat(ctx, "env_1", w.ID, NoHeartbeat, 0)
	if err != nil || hb.LeaseExtended || hb.State != store.WorkStopping {
		t.Fatalf("heartbeat while stopping: %+v %v", hb, err)
	}
	if got, err := q.Stop(ctx, "env_1", w.ID, true); err != nil || got.State != store.WorkStopped {
		t.Fatalf("forced stop: %+v %v", got, err)
	}
	if _, err := q.Stop(ctx, "env_1", w.ID, true); !errors.Is(err, ErrConflict) {
		t.Fatalf("stop of a stopped item: %v", err)
	}
	if len(ss.left) != 1 || len(ss.arrived) != 1 {
		t.Fatalf("notifications: arrived %v left %v", ss.arrived, ss.left)
	}
	stats, polling, err := q.Stats(ctx, "env_1")
	if err != nil || stats.Depth != 0 || polling != 0 {
		t.Fatalf("stats %+v %d %v", stats, polling, err)
	}
}

// TestExecutorSessionsAreNeverOffered: the item of a session that an
// executor took is retired by the next poll or ack, and the session gets
// no new one; an idle session's queued item retires.
func TestExecutorSessionsAreNeverOffered(t *testing.T) {
	ctx := context.Background()
	q, ss, st := newService(t)
	polled, err := q.Enqueue(ctx, "env_1", "sesn_polled", nil)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Enqueue(ctx, "env_1", "sesn_claimed", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Claimed by one worker before the executor took its session.
	if got, err := q.Poll(ctx, "env_1", "worker-a", "", 0, DefaultReclaim); err != nil || got == nil || got.ID != polled.ID {
		t.Fatalf("first poll: %+v %v", got, err)
	}
	if got, err := q.Poll(ctx, "env_1", "worker-a", "", 0, DefaultReclaim); err != nil || got == nil || got.ID != claimed.ID {
		t.Fatalf("second poll: %+v %v", got, err)
	}
	ss.setExecutor("sesn_polled")
	ss.setExecutor("sesn_claimed")
	if _, err := q.Ack(ctx, "env_1", claimed.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("ack of an executor's session: %v, want a conflict", err)
	}
	if got, err := q.Poll(ctx, "env_1", "worker-b", "", 0, 0); err != nil || got != nil {
		t.Fatalf("poll offered %+v (%v); every queued session is an executor's", got, err)
	}
	for _, id := range []string{polled.ID, claimed.ID} {
		if w, err := st.GetWork(ctx, "env_1", id); err != nil || w.State != store.WorkStopped {
			t.Fatalf("item %s: %+v %v, want stopped", id, w.State, err)
		}
	}
	if _, err := q.Enqueue(ctx, "env_1", "sesn_polled", nil); !errors.Is(err, ErrExecutorServes) {
		t.Fatalf("enqueue for an executor's session: %v", err)
	}

	idle, err := q.Enqueue(ctx, "env_1", "sesn_idle", nil)
	if err != nil {
		t.Fatal(err)
	}
	if acked, err := q.Retire(ctx, "sesn_idle"); err != nil || acked {
		t.Fatalf("retire: %v %v", acked, err)
	}
	if stats, _, err := q.Stats(ctx, "env_1"); err != nil || stats.Depth != 0 {
		t.Fatalf("stats after retiring %s: %+v %v", idle.ID, stats, err)
	}
	// A worker's item is not retired.
	held, _ := q.Enqueue(ctx, "env_1", "sesn_held", nil)
	if _, err := q.Ack(ctx, "env_1", held.ID); err != nil {
		t.Fatal(err)
	}
	if acked, err := q.Retire(ctx, "sesn_held"); err != nil || !acked {
		t.Fatalf("retire of an acknowledged item: %v %v", acked, err)
	}
}

// TestConcurrentEnqueue: concurrent enqueues of a dormant session agree on
// one work item (the store refuses a second open one).
func TestConcurrentEnqueue(t *testing.T) {
	ctx := context.Background()
	q, _, st := newService(t)
	const rounds = 20
	for r := range rounds {
		sess := "sesn_" + string(rune('a'+r))
		var got [2]store.WorkItem
		var errs [2]error
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() { got[i], errs[i] = q.Enqueue(ctx, "env_1", sess, nil) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || got[0].ID != got[1].ID {
			t.Fatalf("round %d: %s %v, %s %v; want one item", r, got[0].ID, errs[0], got[1].ID, errs[1])
		}
	}
	list, err := st.ListWork(ctx, "env_1", store.ListQuery{Limit: 100})
	if err != nil || len(list) != rounds {
		t.Fatalf("%d items for %d sessions (%v)", len(list), rounds, err)
	}
}

// TestPollIssuesSessionsToken: each hand-out of an item carries a secret
// that the official workers decode (URL-safe base64 of a JSON object) into
// a new sessions token; the store keeps only the token's hash, which names
// the session, the item, its environment and the key that polled. A reclaimed item's earlier
// token stays valid.
func TestPollIssuesSessionsToken(t *testing.T) {
	ctx := context.Background()
	q, _, st := newService(t)
	ts := ma.Time(time.Now())
	if _, err := st.CreateSession(ctx, ma.Session{ID: "sesn_1", Type: "session", Status: ma.StatusIdle, EnvironmentID: "env_1",
		CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := q.Enqueue(ctx, "env_1", "sesn_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	token := func(c *Claim, keyID string) string {
		t.Helper()
		raw, err := base64.RawURLEncoding.DecodeString(c.Secret)
		var payload map[string]string
		if err != nil || json.Unmarshal(raw, &payload) != nil || len(payload) != 1 || !strings.HasPrefix(payload["sessions_token"], secret.SessionsTokenPrefix) {
			t.Fatalf("secret %q decodes to %s (%v)", c.Secret, raw, err)
		}
		tok, err := st.SessionTokenByHash(ctx, secret.Hash(payload["sessions_token"]))
		if err != nil || tok.SessionID != "sesn_1" || tok.WorkID != w.ID || tok.EnvironmentID != "env_1" || tok.EnvironmentKeyID != keyID {
			t.Fatalf("stored token %+v %v", tok, err)
		}
		if strings.Contains(string(raw), tok.Hash) {
			t.Fatal("the secret carries the stored hash")
		}
		return payload["sessions_token"]
	}
	first, err := q.Poll(ctx, "env_1", "worker-a", "ekey_a", 0, DefaultReclaim)
	if err != nil || first == nil || first.ID != w.ID {
		t.Fatalf("poll: %+v %v", first, err)
	}
	a := token(first, "ekey_a")
	// Reclaimed at once (no reclaim window): another hand-out, another token.
	second, err := q.Poll(ctx, "env_1", "worker-b", "ekey_b", 0, 0)
	if err != nil || second == nil || second.ID != w.ID {
		t.Fatalf("reclaim: %+v %v", second, err)
	}
	if b := token(second, "ekey_b"); b == a {
		t.Fatal("two hand-outs got the same token")
	}
	if _, err := st.SessionTokenByHash(ctx, secret.Hash(a)); err != nil {
		t.Fatalf("the first hand-out's token after a reclaim: %v", err)
	}
}
