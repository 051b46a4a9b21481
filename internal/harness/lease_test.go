package harness

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
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
	h := New(Config{Store: st, Bus: bus.New(), Model: m, Leases: st, Owner: owner, LeaseTTL: 300 * time.Millisecond, IdleLinger: -1})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Shutdown(context.Background()) })
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
	sess, err := st.CreateSession(context.Background(), ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
		Agent: ma.SessionAgent{ID: "agent_x", Model: ma.ModelConfig{ID: "fake"}}, CreatedAt: now, UpdatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st, sess.ID
}

func sendMessage(t *testing.T, st store.Store, sid string) {
	t.Helper()
	if _, err := st.UpdateSession(context.Background(), sid, func(tx store.Tx) error {
		return tx.Append(&ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}})
	}); err != nil {
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
	h := New(Config{Store: st, Bus: bus.New(), Model: m, Leases: blindLeases{st}, Owner: "a", LeaseTTL: 300 * time.Millisecond, IdleLinger: -1})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
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
