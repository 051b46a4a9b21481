package e2e

// Database faults while sessions run: connections cut by the server, the
// server away, the disk full. Each is a delay, never a failed turn.

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	ma "github.com/reinsdev/reins/managedagents"
)

// faultModel is the scripted model (counted) that runs fault after each of
// its next calls answered, before the runner records the answer.
type faultModel struct {
	*callCounter
	left  atomic.Int32 // calls still to fault
	fault func()
}

func (m *faultModel) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	resp, err := m.callCounter.Stream(ctx, req, sink)
	if m.left.Add(-1) >= 0 {
		m.fault()
	}
	return resp, err
}

// driverText is what PostgreSQL's and pgx's errors say, which no event may.
var driverText = []string{"SQLSTATE", "terminating connection", "57P01", "unexpected EOF", "conn closed", "connection refused"}

// waitTurns waits until the session's log has turns ended (end_turn) and
// is idle, and returns it.
func waitTurns(t *testing.T, st store.Store, sid string, turns int, within time.Duration) []store.Entry {
	t.Helper()
	var entries []store.Entry
	pollUntil(t, within, "the turn's end", func() bool {
		var err error
		entries, err = st.ReadLog(context.Background(), sid, 0, 1<<20)
		return err == nil && turnsEnded(entries) >= turns && entries[len(entries)-1].Event.Type == ma.EventStatusIdle
	})
	return entries
}

// checkNoFault fails if the log has a session.error or an event that
// carries a driver's text.
func checkNoFault(t *testing.T, sid string, entries []store.Entry) {
	t.Helper()
	checkLog(t, sid, entries)
	for _, e := range entries {
		b, _ := json.Marshal(e.Event)
		if e.Event.Type == ma.EventSessionError {
			t.Errorf("session %s: %s", sid, b)
		}
		for _, s := range driverText {
			if strings.Contains(string(b), s) {
				t.Errorf("session %s: an event carries the driver's text %q: %s", sid, s, b)
			}
		}
	}
}

// TestDatabaseConnectionsCutMidTurn ends every PostgreSQL connection of a
// replica (pg_terminate_backend, again and again for 300 ms) twice within
// one turn, each time as the model answers, before the answer is
// recorded: the turn completes at once, not after its lease of a minute,
// with no session.error and no driver text in any event. The wake-up
// listener's connection is spared: its reconnect would wake the session
// again, hiding a runner that gave up.
func TestDatabaseConnectionsCutMidTurn(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	var cut atomic.Int32
	var cutting sync.WaitGroup
	m := &faultModel{callCounter: &callCounter{calls: map[string]int{}}}
	terminate := func(ctx context.Context) bool {
		n, err := pgtest.TerminateBackends(ctx, dsn, true)
		if err != nil {
			t.Errorf("terminate backends: %v", err)
		}
		cut.Add(int32(n))
		return err == nil
	}
	m.fault = func() {
		// Once before the answer goes back, then on for 300 ms: the
		// connections the runner makes meanwhile are cut too.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if !terminate(ctx) {
			cancel()
			return
		}
		cutting.Go(func() {
			defer cancel()
			for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end) && terminate(ctx); {
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// A lease far longer than the test waits: the turn must not wait for
	// it to expire (a runner that gave up is picked up by the sweep).
	s := startWith(t, options{models: model.Router{"scripted": m}}, func(c *app.Config) {
		c.DatabaseURL, c.ReplicaID, c.LeaseTTL = dsn, "replica-a", time.Minute
	})
	agent := s.newAgent(t, "scripted", toolset(false))
	sid := s.newSession(t, agent.ID, s.newEnv(t, "cloud").ID).ID
	m.left.Store(2)
	begin := time.Now()
	s.send(t, sid, userMessage(`@tool bash {"command":"echo ran"}`+"\n@then done"))
	entries := waitTurns(t, s.app.Store, sid, 1, 15*time.Second)
	took := time.Since(begin)
	cutting.Wait()
	checkNoFault(t, sid, entries)
	if got := agentTexts(entries); len(got) != 1 || got[0] != "done" {
		t.Errorf("answers %q", got)
	}
	calls := m.of(sid)
	// A cut that lands while the runner holds no connection costs nothing
	// (the pool dials afresh), so which of the two cuts loses an answer is
	// timing; at least one must, or the test cut nothing that mattered.
	if len(calls) != 2 || calls[0]+calls[1] < 3 {
		t.Errorf("model calls by step %v: the cuts lost no answer (the test cut nothing that mattered)", calls)
	}
	t.Logf("%d connections cut in two rounds of 300 ms; model calls by step %v; the turn took %v", cut.Load(), calls, took)
}

// proxiedDB returns a fresh database's DSN through a cutProxy on
// loopback (the replica's way to it), and the direct DSN (the test's).
func proxiedDB(t *testing.T) (via, direct string, p *cutProxy) {
	t.Helper()
	direct = pgtest.FreshDB(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	p = newCutProxy(t, u.Host)
	u.Host = p.addr
	return u.String(), direct, p
}

// TestDatabaseOutageIsADelay cuts a replica (a stable replica id, a lease
// of 10 s) off its PostgreSQL database for 3 s while a turn's model call
// is in flight: every connection is dropped and new ones are refused, as
// when the server restarts. The runner keeps its lease and continues
// within seconds of the database's return, not after the lease; the
// stream open on the replica stays open and gets the turn's end; the log
// has one answer, no session.error, and is gap-free.
func TestDatabaseOutageIsADelay(t *testing.T) {
	via, direct, proxy := proxiedDB(t)
	const ttl = 10 * time.Second
	s := startWith(t, options{models: model.Router{"scripted": &callCounter{calls: map[string]int{}}}}, func(c *app.Config) {
		c.DatabaseURL, c.ReplicaID, c.LeaseTTL = via, "replica-a", ttl
	})
	st, err := postgres.Open(context.Background(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	agent := s.newAgent(t, "scripted")
	sid := s.newSession(t, agent.ID, s.newEnv(t, "env").ID).ID
	stream := s.openStream(t, sid)
	s.send(t, sid, userMessage("@sleep 1s\n@text done"))
	stream.until(func(f frame) bool { return f.Type == ma.EventSpanModelRequestStart })
	proxy.hold(true)
	proxy.cut()
	time.Sleep(3 * time.Second)
	proxy.hold(false)
	back := time.Now()
	got := stream.until(isIdle)
	took := time.Since(back)
	entries := waitTurns(t, st, sid, 1, 10*time.Second)
	checkNoFault(t, sid, entries)
	if texts := agentTexts(entries); len(texts) != 1 || texts[0] != "done" {
		t.Errorf("answers %q", texts)
	}
	if got[len(got)-1].StopReason == nil || got[len(got)-1].StopReason.Type != ma.StopEndTurn {
		t.Errorf("the stream ended the turn with %+v", got[len(got)-1])
	}
	t.Logf("the turn ended %v after the database was back (lease %v)", took, ttl)
	if took > 4*time.Second {
		t.Errorf("the turn ended %v after the database was back: it waited for the lease (%v)", took, ttl)
	}
}
