package harness

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/sessions"
	ma "github.com/reinsdev/reins/managedagents"
)

// recorder is an Observer that records what it is told.
type recorder struct {
	mu        sync.Mutex
	log       []string
	takeovers []string // "session from"
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

func (r *recorder) Turn(ctx context.Context, _ string) (context.Context, func(string)) {
	r.add("turn")
	return ctx, func(o string) { r.add("turn " + o) }
}

func (r *recorder) ModelCall(ctx context.Context, _, modelID string) (context.Context, func(string)) {
	r.add("model " + modelID)
	return ctx, func(o string) { r.add("model " + o) }
}

func (r *recorder) ToolCall(ctx context.Context, _, tool, _ string) (context.Context, func(string)) {
	r.add("tool " + tool)
	return ctx, func(o string) { r.add("tool " + o) }
}

func (r *recorder) SessionError(errType, retry string) { r.add("error " + errType + " " + retry) }

func (r *recorder) LeaseTakeover(sessionID, from string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takeovers = append(r.takeovers, sessionID+" "+from)
}

// TestObserverTakeover: a harness that acquires a session's lease that a
// dead owner let expire reports one takeover from that owner; its own
// later acquisitions of the lease it released are not takeovers. The
// turn and its model call are observed with their outcomes.
func TestObserverTakeover(t *testing.T) {
	st, sid := leaseFixture(t)
	ctx := context.Background()
	if _, err := st.AcquireSession(ctx, sid, "dead", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	sendMessage(t, st, sid)
	time.Sleep(200 * time.Millisecond) // the dead owner's lease expires
	m := newGateModel()
	close(m.gate)
	rec := &recorder{}
	h := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: bus.New(), Model: m, Leases: st, Owner: "b", LeaseTTL: 300 * time.Millisecond, IdleLinger: -1, Observer: rec})
	t.Cleanup(func() { h.Stop(context.Background()) })
	h.Wake(sid)
	waitFor(t, "the first turn's end", func() bool { return countType(t, st, sid, ma.EventStatusIdle) == 1 })
	waitFor(t, "the lease's release", func() bool {
		l, err := st.SessionLease(ctx, sid)
		return err == nil && !l.Live
	})
	sendMessage(t, st, sid)
	h.Wake(sid)
	waitFor(t, "the second turn's end", func() bool { return countType(t, st, sid, ma.EventStatusIdle) == 2 })
	waitFor(t, "the observations", func() bool { return len(rec.lines()) == 8 })
	rec.mu.Lock()
	takeovers := slices.Clone(rec.takeovers)
	rec.mu.Unlock()
	if want := []string{sid + " dead"}; !slices.Equal(takeovers, want) {
		t.Errorf("takeovers %q, want %q", takeovers, want)
	}
	turn := []string{"turn", "model fake", "model ok", "turn end_turn"}
	if got := rec.lines(); !slices.Equal(got, append(turn, turn...)) {
		t.Errorf("observed %q, want %q twice", got, turn)
	}
}
