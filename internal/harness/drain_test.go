package harness

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/sessions"
	ma "github.com/reinsdev/reins/managedagents"
)

// stepModel answers a turn in two model calls: the first, held until
// gate closes, asks for a tool the agent does not have (so the turn goes
// on), the second ends the turn. It records which replica made each call
// and whether the first was cut off.
type stepModel struct {
	name string
	log  *callLog
	gate chan struct{}
}

// callLog is what the stepModels of several replicas recorded.
type callLog struct {
	mu      sync.Mutex
	calls   []string // "replica/messages" of each call, in order
	cut     int      // calls whose context ended first
	started chan struct{}
}

func (m *stepModel) Stream(ctx context.Context, req *model.Request, _ model.Sink) (*model.Response, error) {
	m.log.mu.Lock()
	m.log.calls = append(m.log.calls, m.name+"/"+string(rune('0'+len(req.Messages))))
	m.log.mu.Unlock()
	if len(req.Messages) > 1 {
		return &model.Response{Content: []model.Block{{Type: model.BlockText, Text: "done"}}, StopReason: model.StopEndTurn}, nil
	}
	m.log.started <- struct{}{}
	select {
	case <-m.gate:
	case <-ctx.Done():
		m.log.mu.Lock()
		m.log.cut++
		m.log.mu.Unlock()
		return nil, ctx.Err()
	}
	return &model.Response{Content: []model.Block{{Type: model.BlockToolUse, ID: "toolu_1", Name: "nowhere", Input: []byte(`{}`)}},
		StopReason: model.StopToolUse}, nil
}

func (l *callLog) snapshot() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...), l.cut
}

// TestDrainHandsOver shuts a replica down while its session's model call
// is in flight: the call finishes and is recorded (not redone), and the
// other replica continues the turn at once, told by the draining one,
// long before its sweep (a minute's lease: a sweep every 30 s) would.
func TestDrainHandsOver(t *testing.T) {
	st, sid := leaseFixture(t)
	calls := &callLog{started: make(chan struct{}, 4)}
	gate := make(chan struct{})
	var b *Harness
	busA := bus.New()
	// A's wake-ups reach B at once, as through the database.
	busA.SetRelay(relayFunc(func(n bus.Note) {
		if n.Kind == bus.Wake {
			b.Wake(n.Key)
		}
	}))
	newReplica := func(name string, bs *bus.Bus) *Harness {
		h := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: bs, Model: &stepModel{name: name, log: calls, gate: gate}, Leases: st, Owner: name,
			LeaseTTL: time.Minute, IdleLinger: -1})
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Stop(context.Background()) })
		return h
	}
	a := newReplica("a", busA)
	b = newReplica("b", bus.New())
	sendMessage(t, st, sid)
	a.Wake(sid)
	<-calls.started

	shutdown := make(chan error, 1)
	begin := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- a.Stop(ctx)
	}()
	// The call in flight ends after the drain began.
	waitFor(t, "the drain", a.isDraining)
	close(gate)
	waitFor(t, "the turn's end", func() bool { return countType(t, st, sid, ma.EventStatusIdle) == 1 })
	took := time.Since(begin)
	if err := <-shutdown; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	got, cut := calls.snapshot()
	if len(got) != 2 || got[0] != "a/1" || got[1] != "b/3" || cut != 0 {
		t.Fatalf("model calls %v (%d cut off), want a/1 then b/3", got, cut)
	}
	if took > 5*time.Second {
		t.Fatalf("the turn ended %v after the shutdown began", took)
	}
	if n := countType(t, st, sid, ma.EventSpanModelRequestStart); n != 2 {
		t.Fatalf("%d model request spans, want 2", n)
	}
	t.Logf("turn finished on the other replica %v after the shutdown began", took)
}

// TestDrainIdleSessionStays shuts down a replica whose session went idle:
// it is not handed over (no other replica starts a runner for it).
func TestDrainIdleSessionStays(t *testing.T) {
	st, sid := leaseFixture(t)
	woken := make(chan string, 4)
	busA := bus.New()
	busA.SetRelay(relayFunc(func(n bus.Note) {
		if n.Kind == bus.Wake {
			woken <- n.Key
		}
	}))
	m := newGateModel()
	close(m.gate)
	a := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: busA, Model: m, Leases: st, Owner: "a", LeaseTTL: time.Minute})
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sendMessage(t, st, sid)
	a.Wake(sid)
	waitFor(t, "the turn's end", func() bool { return countType(t, st, sid, ma.EventStatusIdle) == 1 })
	// The runner lingers; the drain ends the linger at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Fatalf("shutdown took %v with an idle session", took)
	}
	select {
	case id := <-woken:
		t.Fatalf("idle session %s handed over", id)
	default:
	}
	if l, err := st.SessionLease(context.Background(), sid); err != nil || l.Live {
		t.Fatalf("lease after shutdown %+v, %v", l, err)
	}
}

// TestDrainHandsOverQueuedInput queues input for a session whose runner
// lingers, without the wake-up a closed harness ignores: the drain ends
// the linger, finds the input in the log and hands the session over.
func TestDrainHandsOverQueuedInput(t *testing.T) {
	st, sid := leaseFixture(t)
	woken := make(chan string, 4)
	busA := bus.New()
	busA.SetRelay(relayFunc(func(n bus.Note) {
		if n.Kind == bus.Wake {
			woken <- n.Key
		}
	}))
	m := newGateModel()
	close(m.gate)
	a := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: busA, Model: m, Leases: st, Owner: "a", LeaseTTL: time.Minute})
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sendMessage(t, st, sid)
	a.Wake(sid)
	waitFor(t, "the turn's end", func() bool { return countType(t, st, sid, ma.EventStatusIdle) == 1 })
	sendMessage(t, st, sid) // no Wake: its wake-up came while the harness was closed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-woken:
		if id != sid {
			t.Fatalf("handed over %s, want %s", id, sid)
		}
	default:
		t.Fatal("a session with queued input was not handed over")
	}
}

// relayFunc is a bus.Relay calling a function: the wake-ups of replicas,
// without the database.
type relayFunc func(bus.Note)

func (f relayFunc) Send(n bus.Note) { f(n) }
