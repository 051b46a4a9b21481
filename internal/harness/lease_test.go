package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
)

// gateModel counts its calls and answers each once the gate opens; a call
// whose context ends first reports that on cancelled.
type gateModel struct {
	mu        sync.Mutex
	calls     int
	started   chan struct{} // receives at each call
	gate      chan struct{}
	cancelled chan struct{} // receives when a call's context ended
}

func newGateModel() *gateModel {
	return &gateModel{started: make(chan struct{}, 16), gate: make(chan struct{}), cancelled: make(chan struct{}, 16)}
}

func (m *gateModel) Stream(ctx context.Context, _ *model.Request, _ model.Sink) (*model.Response, error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	m.started <- struct{}{}
	select {
	case <-m.gate:
	case <-ctx.Done():
		m.cancelled <- struct{}{}
		return nil, ctx.Err()
	}
	return &model.Response{Content: []model.Block{{Type: model.BlockText, Text: "ok"}}, StopReason: model.StopEndTurn}, nil
}

func (m *gateModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// replica is a harness under leases on a shared store.
func replica(t *testing.T, st store.Store, owner string, m model.Provider) *Harness {
	t.Helper()
	h := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: bus.New(), Model: m, Leases: st, Owner: owner, LeaseTTL: 300 * time.Millisecond, IdleLinger: -1})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(context.Background()) })
	return h
}

func leaseFixture(t *testing.T) (store.Store, string) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := ma.Time(time.Now())
	sess, err := storetest.NewSession(context.Background(), st, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
		Agent: ma.SessionAgent{ID: "agent_x", Model: ma.ModelConfig{ID: "fake"}}, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return st, sess.ID
}

func sendMessage(t *testing.T, st store.Store, sid string) {
	t.Helper()
	if _, err := storetest.Append(context.Background(), st, sid,
		&ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countType(t *testing.T, st store.Store, sid, typ string) int {
	t.Helper()
	entries, err := st.ReadLog(context.Background(), sid, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Event.Type == typ {
			n++
		}
	}
	return n
}

// TestLeaseOneRunnerAcrossHarnesses wakes one session on two harnesses
// sharing a store, as two replicas would be: only the lease holder runs
// the turn, and the model is called once.
func TestLeaseOneRunnerAcrossHarnesses(t *testing.T) {
	st, sid := leaseFixture(t)
	m := newGateModel()
	a := replica(t, st, "a", m)
	b := replica(t, st, "b", m)
	sendMessage(t, st, sid)
	a.Wake(sid)
	b.Wake(sid)
	<-m.started
	// Both stay woken past several renewals and sweeps.
	time.Sleep(time.Second)
	a.Wake(sid)
	b.Wake(sid)
	close(m.gate)
	waitFor(t, "the turn's end", func() bool { return countType(t, st, sid, ma.EventStatusIdle) == 1 })
	time.Sleep(500 * time.Millisecond)
	if n := m.count(); n != 1 {
		t.Fatalf("model called %d times for one turn", n)
	}
	if n := countType(t, st, sid, ma.EventSpanModelRequestStart); n != 1 {
		t.Fatalf("%d model request spans for one turn", n)
	}
	waitFor(t, "the lease's release", func() bool {
		l, err := st.SessionLease(context.Background(), sid)
		return err == nil && !l.Live
	})
}

// TestLeaseLostStopsRunner takes a running session's lease away: its
// runner's model call is cancelled within a renewal period, it appends
// nothing more, and the old owner does not run the session again while
// the new owner holds it.
func TestLeaseLostStopsRunner(t *testing.T) {
	st, sid := leaseFixture(t)
	m := newGateModel()
	a := replica(t, st, "a", m)
	sendMessage(t, st, sid)
	a.Wake(sid)
	<-m.started
	ctx := context.Background()
	if _, err := st.AcquireSession(ctx, sid, "thief", time.Minute); err == nil {
		t.Fatal("acquired a live lease")
	}
	// The thief takes over once the lease is free or expired; until then
	// the runner keeps renewing it, so fence it off by hand: release and
	// take it in one go is what a takeover after expiry amounts to.
	l, _ := st.SessionLease(ctx, sid)
	if err := st.ReleaseSession(ctx, sid, "a", l.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireSession(ctx, sid, "thief", time.Minute); err != nil {
		t.Fatal(err)
	}
	seq, _ := st.LastSeq(ctx, sid)
	select {
	case <-m.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the runner's model call outlived its lease")
	}
	waitFor(t, "the runner's exit", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.runners[sid] == nil
	})
	a.Wake(sid)
	time.Sleep(500 * time.Millisecond)
	if after, _ := st.LastSeq(ctx, sid); after != seq {
		t.Fatalf("the old owner appended after losing its lease: seq %d -> %d", seq, after)
	}
	if n := m.count(); n != 1 {
		t.Fatalf("model called %d times; the old owner ran again", n)
	}
}

// TestLeaseStartResumesOwnLeases starts a harness under the owner name of
// a process that crashed holding a session's lease: it resumes the session
// at once, while a harness of another name leaves it to the lease.
func TestLeaseStartResumesOwnLeases(t *testing.T) {
	st, sid := leaseFixture(t)
	sendMessage(t, st, sid)
	if _, err := st.AcquireSession(context.Background(), sid, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	m := newGateModel()
	close(m.gate)
	replica(t, st, "b", m)
	time.Sleep(time.Second)
	if n := m.count(); n != 0 {
		t.Fatalf("another owner ran a session under a live lease (%d model calls)", n)
	}
	replica(t, st, "a", m)
	waitFor(t, "the turn's end", func() bool { return countType(t, st, sid, ma.EventStatusIdle) == 1 })
	if n := m.count(); n != 1 {
		t.Fatalf("model called %d times", n)
	}
}

// blindLeases renews nothing and always succeeds: the leases of a replica
// that believes it still owns its sessions (paused past its lease, or its
// clock wrong), which only the fence can stop.
type blindLeases struct{ store.Leases }

func (blindLeases) RenewSession(context.Context, string, string, int64, time.Duration) error {
	return nil
}

func (blindLeases) RenewSessions(context.Context, string, []store.Fence, time.Duration) ([]string, error) {
	return nil, nil
}

// TestLeaseFenceStopsStaleOwner lets a runner that does not know it lost
// its lease finish its model call after another owner took the session
// over: the fence refuses its write, so the model's answer is never
// appended, and the runner leaves.
func TestLeaseFenceStopsStaleOwner(t *testing.T) {
	st, sid := leaseFixture(t)
	m := newGateModel()
	h := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: bus.New(), Model: m, Leases: blindLeases{st}, Owner: "a", LeaseTTL: 300 * time.Millisecond, IdleLinger: -1})
	t.Cleanup(func() { h.Stop(context.Background()) })
	sendMessage(t, st, sid)
	h.Wake(sid)
	<-m.started
	ctx := context.Background()
	waitFor(t, "the lease's expiry", func() bool {
		_, err := st.AcquireSession(ctx, sid, "b", time.Minute)
		return err == nil
	})
	seq, _ := st.LastSeq(ctx, sid)
	close(m.gate)
	waitFor(t, "the stale runner's exit", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.runners[sid] == nil
	})
	if after, _ := st.LastSeq(ctx, sid); after != seq {
		t.Fatalf("the stale owner appended: seq %d -> %d", seq, after)
	}
	if n := countType(t, st, sid, ma.EventAgentMessage); n != 0 {
		t.Fatalf("%d agent messages from a stale owner", n)
	}
}

// outageStore is a store that fails every call the harness makes with
// store.ErrUnavailable while down is set, as a database away would.
type outageStore struct {
	store.Store
	down atomic.Bool
}

func (s *outageStore) err() error {
	if s.down.Load() {
		return fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	}
	return nil
}

func (s *outageStore) GetSession(ctx context.Context, id string) (ma.Session, error) {
	if err := s.err(); err != nil {
		return ma.Session{}, err
	}
	return s.Store.GetSession(ctx, id)
}

// Update is the harness's write path over the store, failing as the
// store does.
func (s *outageStore) Update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	if err := s.err(); err != nil {
		return ma.Session{}, err
	}
	return sessions.NewWriter(s.Store).Update(ctx, id, fn)
}

func (s *outageStore) ReadLog(ctx context.Context, id string, after int64, limit int) ([]store.Entry, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.ReadLog(ctx, id, after, limit)
}

func (s *outageStore) AcquireSession(ctx context.Context, id, owner string, ttl time.Duration) (int64, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.Store.AcquireSession(ctx, id, owner, ttl)
}

func (s *outageStore) RenewSessions(ctx context.Context, owner string, leases []store.Fence, ttl time.Duration) ([]string, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.RenewSessions(ctx, owner, leases, ttl)
}

func (s *outageStore) ReleaseSession(ctx context.Context, id, owner string, token int64) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.ReleaseSession(ctx, id, owner, token)
}

func (s *outageStore) UnownedSessions(ctx context.Context, owner string) ([]string, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.UnownedSessions(ctx, owner)
}

// sleepModel answers "ok" after a delay.
type sleepModel struct{ delay time.Duration }

func (m sleepModel) Stream(ctx context.Context, _ *model.Request, _ model.Sink) (*model.Response, error) {
	select {
	case <-time.After(m.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &model.Response{Content: []model.Block{{Type: model.BlockText, Text: "ok"}}, StopReason: model.StopEndTurn}, nil
}

// TestOutageLongerThanTheLease: the database goes away mid-turn for
// longer than the session's lease (20 s): the lease expires unrenewed and
// the runner stops. Once the database is back, the replica takes its
// session again within a second (its own lease, under a new token), not
// once the lease expired in the database and a sweep found it, and the
// turn ends: one answer, no session.error.
func TestOutageLongerThanTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, sid := leaseFixture(t)
		os := &outageStore{Store: st}
		h := New(Config{Store: os, Writer: os, Bus: bus.New(), Model: sleepModel{2 * time.Second}, Leases: os, Owner: "a", LeaseTTL: 20 * time.Second, IdleLinger: -1})
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop(context.Background())
		sendMessage(t, st, sid)
		h.Wake(sid)
		time.Sleep(time.Second) // the model call is in flight
		os.down.Store(true)
		time.Sleep(30 * time.Second) // the lease expires meanwhile
		synctest.Wait()
		// (The database's lease expires by its own clock, which fake
		// time does not move: only the harness knows it lost it.)
		h.mu.Lock()
		left := len(h.runners) == 0
		h.mu.Unlock()
		if !left {
			t.Fatal("the runner is still there after its lease expired unrenewed")
		}
		before, _ := st.SessionLease(context.Background(), sid)
		os.down.Store(false)
		// Up to a second to notice, two for the model call made again.
		time.Sleep(3*time.Second + 100*time.Millisecond)
		synctest.Wait()
		if n := countType(t, st, sid, ma.EventAgentMessage); n != 1 {
			t.Fatalf("%d answers 3 s after the database came back, want 1", n)
		}
		if n := countType(t, st, sid, ma.EventSessionError); n != 0 {
			t.Fatalf("%d session.error events", n)
		}
		if l, _ := st.SessionLease(context.Background(), sid); l.Token <= before.Token {
			t.Fatalf("lease token %d after the reclaim, %d before: not acquired anew", l.Token, before.Token)
		}
	})
}

// failingUpdates is a write path whose next fail session updates fail
// with an error the harness cannot classify.
type failingUpdates struct {
	store.Store
	fail atomic.Int32
}

func (s *failingUpdates) Update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	if s.fail.Add(-1) >= 0 {
		return ma.Session{}, fmt.Errorf("disk I/O error")
	}
	return sessions.NewWriter(s.Store).Update(ctx, id, fn)
}

// TestSweepWithoutLeases: without leases (SQLite, one process), a runner
// that stopped because the store failed even to record its failure is
// picked up again by the sweep, without a restart: the queued message is
// answered within half a lease TTL.
func TestSweepWithoutLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, sid := leaseFixture(t)
		fs := &failingUpdates{Store: st}
		fs.fail.Store(2) // the turn's start, then its failure's record
		h := New(Config{Store: fs, Writer: fs, Bus: bus.New(), Model: sleepModel{time.Second}, IdleLinger: -1})
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer h.Stop(context.Background())
		sendMessage(t, st, sid)
		h.Wake(sid)
		synctest.Wait()
		if n := countType(t, st, sid, ma.EventAgentMessage); n != 0 {
			t.Fatalf("%d answers while the store failed", n)
		}
		time.Sleep(DefaultLeaseTTL/2 + 2*time.Second)
		synctest.Wait()
		if n := countType(t, st, sid, ma.EventAgentMessage); n != 1 {
			t.Fatalf("%d answers after the sweep, want 1", n)
		}
	})
}
