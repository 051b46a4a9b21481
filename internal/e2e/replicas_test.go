package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/scripted"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// callCounter is the scripted model, counting its calls by position in the
// conversation (session and number of messages): a model call made twice
// for one step of a turn counts 2. Every replica shares one counter.
type callCounter struct {
	inner scripted.Provider
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	c.mu.Lock()
	c.calls[fmt.Sprintf("%s/%d", req.SessionID, len(req.Messages))]++
	c.mu.Unlock()
	return c.inner.Stream(ctx, req, sink)
}

// of returns the session's call counts, in conversation order.
func (c *callCounter) of(sessionID string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for n := 1; n < 100; n++ {
		if k, ok := c.calls[fmt.Sprintf("%s/%d", sessionID, n)]; ok {
			out = append(out, k)
		}
	}
	return out
}

// replicaTTL is the replicas' session lease in these tests.
const replicaTTL = 2 * time.Second

// startReplica starts a server named id on the database.
func startReplica(t *testing.T, dsn, id string, m model.Provider) *server {
	t.Helper()
	return startWith(t, options{models: model.Router{"scripted": m}}, func(c *app.Config) {
		c.DatabaseURL, c.ReplicaID, c.LeaseTTL = dsn, id, replicaTTL
	})
}

// logOf reads a session's whole log from a store.
func logOf(t *testing.T, st store.Store, sessionID string) []store.Entry {
	t.Helper()
	entries, err := st.ReadLog(context.Background(), sessionID, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// checkLog fails unless the log's seqs are 1..n without gaps and every
// persisted event id appears once, echoes of queued client events aside.
func checkLog(t *testing.T, sessionID string, entries []store.Entry) {
	t.Helper()
	seen := map[string]int{}
	for i, e := range entries {
		if e.Seq != int64(i+1) {
			t.Fatalf("session %s: entry %d has seq %d", sessionID, i, e.Seq)
		}
		seen[e.Event.ID]++
		if n := seen[e.Event.ID]; n > 1 && !(n == 2 && e.Event.Type == ma.EventUserMessage) {
			t.Fatalf("session %s: event %s (%s) logged %d times", sessionID, e.Event.ID, e.Event.Type, n)
		}
	}
}

func countOf(entries []store.Entry, typ string) int {
	n := 0
	for _, e := range entries {
		if e.Event.Type == typ {
			n++
		}
	}
	return n
}

// TestReplicasRunEachTurnOnce runs two servers on one PostgreSQL database:
// sessions created on A get their messages on B and are streamed from both.
// Each turn runs once (one model call per step, one bash run per tool
// use), both streams see the same events, and the logs are gap-free.
func TestReplicasRunEachTurnOnce(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	a := startReplica(t, dsn, "replica-a", calls)
	b := startReplica(t, dsn, "replica-b", calls)
	agent := a.newAgent(t, "scripted", toolset(false))
	env := a.newEnv(t, "cloud")
	const n = 6
	type run struct {
		id     string
		bash   bool
		onA    *stream
		onB    *stream
		wantMC []int
	}
	runs := make([]run, n)
	for i := range runs {
		sess := a.newSession(t, agent.ID, env.ID)
		r := run{id: sess.ID, bash: i%2 == 1, onA: a.openStream(t, sess.ID), onB: b.openStream(t, sess.ID), wantMC: []int{1}}
		if r.bash {
			r.wantMC = []int{1, 1}
		}
		runs[i] = r
	}
	for i, r := range runs {
		msg := fmt.Sprintf("hello %d", i)
		if r.bash {
			msg = fmt.Sprintf(`@tool bash {"command":"echo ran %d"}`+"\n@then done", i)
		}
		b.send(t, r.id, userMessage(msg))
	}
	for i, r := range runs {
		gotA, gotB := r.onA.until(isIdle), r.onB.until(isIdle)
		if !slices.Equal(types(gotA), types(gotB)) {
			t.Fatalf("session %d: stream on A %v, on B %v", i, types(gotA), types(gotB))
		}
		entries := logOf(t, b.app.Store, r.id)
		checkLog(t, r.id, entries)
		if got := calls.of(r.id); !slices.Equal(got, r.wantMC) {
			t.Fatalf("session %d: model calls %v, want %v", i, got, r.wantMC)
		}
		if got, want := countOf(entries, ma.EventSpanModelRequestStart), len(r.wantMC); got != want {
			t.Fatalf("session %d: %d model request spans, want %d", i, got, want)
		}
		results := countOf(entries, ma.EventAgentToolResult)
		if r.bash && results != 1 || !r.bash && results != 0 {
			t.Fatalf("session %d: %d tool results", i, results)
		}
		if !r.bash && gotA[4].Content[0].Text != fmt.Sprintf("You said: hello %d", i) {
			t.Fatalf("session %d: answer %+v", i, gotA[4].Content)
		}
	}
}

// TestReplicaCrashTakeover cuts a replica off its database (a crash, as
// far as the others can tell: its leases are never released) while the
// sessions it runs are mid-turn. The other replica takes them over once
// the leases expire and finishes every turn; the turns that had completed
// are not run again.
func TestReplicaCrashTakeover(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	replicas := map[string]*server{
		"replica-a": startReplica(t, dsn, "replica-a", calls),
		"replica-b": startReplica(t, dsn, "replica-b", calls),
	}
	a, b := replicas["replica-a"], replicas["replica-b"]
	agent := b.newAgent(t, "scripted")
	env := b.newEnv(t, "env")
	const n = 4
	ids := make([]string, n)
	streams := map[string][]*stream{}
	for i := range ids {
		ids[i] = b.newSession(t, agent.ID, env.ID).ID
		for name, s := range replicas {
			streams[name] = append(streams[name], s.openStream(t, ids[i]))
		}
		// A first turn, which completes.
		a.send(t, ids[i], userMessage(fmt.Sprintf("first %d", i)))
	}
	for _, sts := range streams {
		for _, st := range sts {
			st.until(isIdle)
		}
	}
	// A second turn, slow (longer than a lease), that is mid-turn at the
	// crash.
	for i, id := range ids {
		a.send(t, id, userMessage(fmt.Sprintf("@sleep 4s\n@text slow %d", i)))
	}
	for _, sts := range streams {
		for _, st := range sts {
			st.until(func(f frame) bool { return f.Type == ma.EventSpanModelRequestStart })
		}
	}
	// The replica that runs the most of them crashes.
	owners := map[string]int{}
	for _, id := range ids {
		l, err := b.app.Store.SessionLease(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if l.Live {
			owners[l.Owner]++
		}
	}
	victim, survivor := "replica-a", "replica-b"
	if owners[survivor] > owners[victim] {
		victim, survivor = survivor, victim
	}
	if owners[victim] == 0 {
		t.Fatalf("leases %v: no session runs anywhere", owners)
	}
	// Cut the victim off its database: it can neither renew nor release
	// its leases.
	crashed := time.Now()
	replicas[victim].app.Store.Close()
	for i, st := range streams[survivor] {
		got := st.until(isIdle)
		if sr := got[len(got)-1].StopReason; sr != nil && sr.Type != ma.StopEndTurn {
			t.Fatalf("session %d ended %+v", i, sr)
		}
	}
	took := time.Since(crashed)
	t.Logf("%d of %d sessions taken over from %s in %v (lease ttl %v)", owners[victim], n, victim, took, replicaTTL)
	if took > 30*time.Second {
		t.Fatalf("takeover took %v", took)
	}
	st := replicas[survivor].app.Store
	for i, id := range ids {
		entries := logOf(t, st, id)
		checkLog(t, id, entries)
		got := calls.of(id)
		if len(got) != 2 || got[0] != 1 {
			t.Fatalf("session %d: model calls %v: the completed first turn ran again", i, got)
		}
		if msgs := countOf(entries, ma.EventAgentMessage); msgs != 2 {
			t.Fatalf("session %d: %d agent messages for two turns", i, msgs)
		}
		if last := entries[len(entries)-1].Event; last.Type != ma.EventStatusIdle {
			t.Fatalf("session %d ends with %s", i, last.Type)
		}
		l, err := st.SessionLease(context.Background(), id)
		if err != nil || l.Owner == victim {
			t.Fatalf("session %d: lease %+v, %v", i, l, err)
		}
	}
}

// TestReplicaInterruptReachesOwner interrupts a turn on the replica that
// does not run it: the interrupt reaches the owner's runner, whose model
// call stops at once instead of running to its end.
func TestReplicaInterruptReachesOwner(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	replicas := map[string]*server{
		"replica-a": startReplica(t, dsn, "replica-a", calls),
		"replica-b": startReplica(t, dsn, "replica-b", calls),
	}
	a, b := replicas["replica-a"], replicas["replica-b"]
	agent := a.newAgent(t, "scripted")
	sess := a.newSession(t, agent.ID, a.newEnv(t, "env").ID)
	st := a.openStream(t, sess.ID)
	a.send(t, sess.ID, userMessage("@sleep 60s\n@text too late"))
	st.until(func(f frame) bool { return f.Type == ma.EventSpanModelRequestStart })
	l, err := b.app.Store.SessionLease(context.Background(), sess.ID)
	if err != nil || !l.Live {
		t.Fatalf("lease %+v, %v: the turn runs nowhere", l, err)
	}
	other := a
	if l.Owner == "replica-a" {
		other = b
	}
	begin := time.Now()
	other.send(t, sess.ID, interruptEvent())
	st.until(isIdle)
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("the interrupt took %v to stop the turn", took)
	}
	if n := countOf(logOf(t, b.app.Store, sess.ID), ma.EventAgentMessage); n != 0 {
		t.Fatalf("%d agent messages after the interrupt", n)
	}
}

// TestReplicaWithAnotherMasterKeyRefused: a replica whose master key is
// not the one the database's vault secrets are sealed under does not
// start, and says which setting to fix; one with the same key does.
func TestReplicaWithAnotherMasterKeyRefused(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	startWith(t, options{}, func(c *app.Config) { c.DatabaseURL, c.ReplicaID = dsn, "a" })
	_, err := app.New(context.Background(), app.Config{DataDir: t.TempDir(), DatabaseURL: dsn, ReplicaID: "b",
		MasterKey: []byte("another-master-key-of-32-bytes!!")})
	if err == nil || !strings.Contains(err.Error(), "REINS_MASTER_KEY") {
		t.Fatalf("a replica with another master key: %v", err)
	}
	startWith(t, options{}, func(c *app.Config) { c.DatabaseURL, c.ReplicaID = dsn, "c" })
}
