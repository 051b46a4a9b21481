package sessions

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// runner records what the service asks of the harness.
type runner struct {
	mu          sync.Mutex // guards the fields below
	woken       []string
	interrupted []string
}

func (r *runner) Wake(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.woken = append(r.woken, id)
}

func (r *runner) Interrupt(id, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.interrupted = append(r.interrupted, id)
}

func (r *runner) counts() (woken, interrupted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.woken), len(r.interrupted)
}

// fixture is a Service over a real store, with one cloud environment.
type fixture struct {
	t   *testing.T
	st  store.Store
	svc *Service
	run *runner
	env string
}

// eachStore runs fn on SQLite in a temporary directory and on a fresh
// PostgreSQL database.
func eachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.FreshDB(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

func newFixture(t *testing.T, st store.Store) *fixture {
	f := &fixture{t: t, st: st, run: &runner{}}
	f.svc = New(Config{Store: st, Bus: bus.New(), Runner: f.run})
	f.env = f.environment(ma.EnvCloud, false)
	return f
}

// environment stores an environment of that type.
func (f *fixture) environment(typ string, archived bool) string {
	f.t.Helper()
	now := ma.Time(time.Now())
	e := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: ids.New("name_"), Config: ma.EnvironmentConfig{Type: typ},
		Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}
	if archived {
		e.ArchivedAt = &now
	}
	if err := f.st.CreateEnvironment(context.Background(), e); err != nil {
		f.t.Fatal(err)
	}
	return e.ID
}

// session creates an idle session through the service.
func (f *fixture) session(initial ...ma.Event) ma.Session {
	f.t.Helper()
	ctx := context.Background()
	sess, err := f.svc.Prepare(ctx, Draft{Agent: ma.SessionAgent{ID: "agent_x"}, EnvironmentID: f.env, Initial: initial})
	if err != nil {
		f.t.Fatal(err)
	}
	if sess, err = f.svc.Create(ctx, sess, initial, nil); err != nil {
		f.t.Fatal(err)
	}
	return sess
}

// log returns the session's live events.
func (f *fixture) log(id string) []ma.Event {
	f.t.Helper()
	entries, err := f.st.ReadLog(context.Background(), id, 0, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	evs := make([]ma.Event, len(entries))
	for i, e := range entries {
		evs[i] = e.Event
	}
	return evs
}

// set changes the session's row as its runner would.
func (f *fixture) set(id string, fn func(*ma.Session)) {
	f.t.Helper()
	if _, err := f.svc.Writer().Update(context.Background(), id, func(tx store.Tx) error { fn(tx.Session()); return nil }); err != nil {
		f.t.Fatal(err)
	}
}

// runnerAppends appends events as the session's runner does.
func (f *fixture) runnerAppends(id string, evs ...*ma.Event) {
	f.t.Helper()
	if _, err := f.svc.Writer().Update(context.Background(), id, func(tx store.Tx) error { return tx.Append(evs...) }); err != nil {
		f.t.Fatal(err)
	}
}

// wantRejected fails unless err is a *RejectedError of that kind whose
// message holds msg.
func wantRejected(t *testing.T, err error, kind, msg string) {
	t.Helper()
	var re *RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a rejection %q", err, msg)
	}
	got := "bad"
	switch {
	case re.Conflict:
		got = "conflict"
	case re.NotFound:
		got = "not found"
	}
	if got != kind || !strings.Contains(re.Message, msg) {
		t.Fatalf("got %s %q, want %s %q", got, re.Message, kind, msg)
	}
}

func TestPrepare(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		now := ma.Time(time.Now())
		vault := ma.Vault{ID: ids.New("vlt_"), Type: "vault", Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}
		archivedVault := vault
		archivedVault.ID, archivedVault.ArchivedAt = ids.New("vlt_"), &now
		for _, v := range []ma.Vault{vault, archivedVault} {
			if err := st.CreateVault(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		many := map[string]string{}
		for i := range 17 {
			many[fmt.Sprint("k", i)] = "v"
		}
		msg := ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}}
		ok := Draft{Agent: ma.SessionAgent{ID: "agent_x"}, EnvironmentID: f.env}
		with := func(fn func(d *Draft)) Draft { d := ok; fn(&d); return d }
		for _, tt := range []struct {
			d          Draft
			kind, want string
		}{
			{with(func(d *Draft) { d.EnvironmentID = "" }), "bad", "environment_id: required"},
			{with(func(d *Draft) { d.Title = strings.Repeat("é", MaxTitle+1) }), "bad", "title: must be 0 to 1024 characters, got 1025"},
			{with(func(d *Draft) { d.Metadata = many }), "bad", "metadata: at most 16 keys"},
			{with(func(d *Draft) { d.VaultIDs = make([]string, MaxVaults+1) }), "bad", "vault_ids: at most 20 vaults"},
			{with(func(d *Draft) { d.VaultIDs = []string{vault.ID, "vlt_nope"} }), "not found", "vault_ids[1]: vault vlt_nope not found"},
			{with(func(d *Draft) { d.VaultIDs = []string{archivedVault.ID} }), "bad", "is archived"},
			{with(func(d *Draft) { d.Initial = []ma.Event{msg, {Type: ma.EventUserInterrupt}} }), "bad", `initial_events[1].type: only user.message`},
			{with(func(d *Draft) { d.Initial = make([]ma.Event, MaxInitialEvents+1) }), "bad", "initial_events: at most 50 events"},
			{with(func(d *Draft) { d.EnvironmentID = "env_nope" }), "not found", "environment env_nope not found"},
			{with(func(d *Draft) { d.EnvironmentID = f.environment(ma.EnvCloud, true) }), "bad", "is archived; new sessions cannot use it"},
			{with(func(d *Draft) { d.EnvironmentID, d.Tokens = f.environment(ma.EnvSelfHosted, false), true }), "bad", "authorization_token needs a cloud environment"},
		} {
			_, err := f.svc.Prepare(ctx, tt.d)
			wantRejected(t, err, tt.kind, tt.want)
		}
		sess, err := f.svc.Prepare(ctx, with(func(d *Draft) { d.Tokens, d.VaultIDs, d.Initial = true, []string{vault.ID}, []ma.Event{msg} }))
		if err != nil {
			t.Fatal(err)
		}
		if sess.Status != ma.StatusIdle || sess.EnvironmentID != f.env || sess.Metadata == nil || sess.Resources == nil || len(sess.VaultIDs) != 1 ||
			sess.Budget != nil || !strings.HasPrefix(sess.ID, ids.Session) {
			t.Fatalf("prepared %+v", sess)
		}
		if _, err := st.GetSession(ctx, sess.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Prepare wrote the session: %v", err)
		}
	})
}

func TestCreate(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		if f.session(); true {
			if woken, _ := f.run.counts(); woken != 0 {
				t.Fatal("a session without input woke its runner")
			}
		}
		msg := ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}}
		sess, err := f.svc.Prepare(ctx, Draft{Agent: ma.SessionAgent{ID: "agent_x"}, EnvironmentID: f.env, Initial: []ma.Event{msg}})
		if err != nil {
			t.Fatal(err)
		}
		var first int64
		sess, err = f.svc.Create(ctx, sess, []ma.Event{msg}, func(tx store.Tx, seq int64) error {
			first = seq
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if evs := f.log(sess.ID); len(evs) != 1 || evs[0].Type != ma.EventUserMessage || first != 1 {
			t.Fatalf("log %+v, record called with %d", evs, first)
		}
		if woken, _ := f.run.counts(); woken != 1 {
			t.Fatalf("woken %d times", woken)
		}
		// A record that fails rolls the creation back.
		again, err := f.svc.Prepare(ctx, Draft{Agent: ma.SessionAgent{ID: "agent_x"}, EnvironmentID: f.env})
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if _, err := f.svc.Create(ctx, again, nil, func(store.Tx, int64) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("create: %v", err)
		}
		if _, err := st.GetSession(ctx, again.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("rolled back session: %v", err)
		}
	})
}

func TestPatch(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		sess := f.session()
		title, same := "new", ""
		a, b := "1", "2"
		got, err := f.svc.Patch(ctx, sess.ID, Patch{Title: &title, Metadata: map[string]*string{"a": &a, "b": &b}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Title != "new" || got.Metadata["a"] != "1" || got.Metadata["b"] != "2" {
			t.Fatalf("patched %+v", got)
		}
		evs := f.log(sess.ID)
		if len(evs) != 1 || evs[0].Type != ma.EventSessionUpdated || evs[0].Title == nil || *evs[0].Title != "new" || evs[0].Metadata["a"] != "1" || evs[0].ProcessedAt == nil {
			t.Fatalf("log %+v", evs)
		}
		// The same title changes nothing and logs nothing.
		if _, err := f.svc.Patch(ctx, sess.ID, Patch{Title: &title}); err != nil {
			t.Fatal(err)
		}
		if n := len(f.log(sess.ID)); n != 1 {
			t.Fatalf("an unchanged title logged: %d events", n)
		}
		// A nil or empty value deletes a key; the result is checked.
		if got, err = f.svc.Patch(ctx, sess.ID, Patch{Title: &same, Metadata: map[string]*string{"a": nil, "b": &same}}); err != nil || len(got.Metadata) != 0 || got.Title != "" {
			t.Fatalf("patched %+v, %v", got, err)
		}
		many := map[string]*string{}
		for i := range 17 {
			many[fmt.Sprint("k", i)] = &a
		}
		_, err = f.svc.Patch(ctx, sess.ID, Patch{Title: &title, Metadata: many})
		wantRejected(t, err, "bad", "metadata: at most 16 keys")
		if cur, _ := st.GetSession(ctx, sess.ID); cur.Title != "" {
			t.Fatal("a refused patch wrote its title")
		}
		// Tools are resolved from the agent as it is.
		tools := []ma.Tool{{Type: ma.ToolTypeAgentToolset}}
		var seen ma.SessionAgent
		resolve := func(cur ma.SessionAgent) ([]ma.Tool, []ma.MCPServer, error) {
			seen = cur
			return tools, []ma.MCPServer{}, nil
		}
		if got, err = f.svc.Patch(ctx, sess.ID, Patch{Tools: resolve}); err != nil || len(got.Agent.Tools) != 1 || seen.ID != "agent_x" {
			t.Fatalf("patched %+v (resolved from %+v), %v", got.Agent, seen, err)
		}
		if evs := f.log(sess.ID); !strings.Contains(string(evs[len(evs)-1].Agent), `"tools":[{`) {
			t.Fatalf("session.updated %s", evs[len(evs)-1].Agent)
		}
		bad := errors.New("agent.tools: bad")
		if _, err := f.svc.Patch(ctx, sess.ID, Patch{Tools: func(ma.SessionAgent) ([]ma.Tool, []ma.MCPServer, error) { return nil, nil, bad }}); !errors.Is(err, bad) {
			t.Fatalf("resolver error: %v", err)
		}
		f.set(sess.ID, func(s *ma.Session) { s.Status = ma.StatusRunning })
		_, err = f.svc.Patch(ctx, sess.ID, Patch{Tools: resolve})
		wantRejected(t, err, "conflict", "the session is running")
		if _, err := f.svc.Patch(ctx, sess.ID, Patch{Title: &title}); err != nil {
			t.Fatalf("a running session's title: %v", err)
		}
		f.set(sess.ID, func(s *ma.Session) { s.Status = ma.StatusIdle; s.ArchivedAt = &s.UpdatedAt })
		_, err = f.svc.Patch(ctx, sess.ID, Patch{Title: &same})
		wantRejected(t, err, "conflict", "archived and read-only")
	})
}

func TestResources(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		sess := f.session()
		res := func(mount string) ma.SessionResource {
			return ma.SessionResource{ID: ids.New("sesrsc_"), Type: "file", FileID: "file_x", MountPath: mount}
		}
		first := res("/workspace/a")
		if err := f.svc.AddResource(ctx, sess.ID, first); err != nil {
			t.Fatal(err)
		}
		err := f.svc.AddResource(ctx, sess.ID, res("/workspace/a"))
		wantRejected(t, err, "bad", "/workspace/a is the mount path of another resource")
		for i := 1; i < MaxResources; i++ {
			if err := f.svc.AddResource(ctx, sess.ID, res(fmt.Sprint("/workspace/r", i))); err != nil {
				t.Fatal(err)
			}
		}
		err = f.svc.AddResource(ctx, sess.ID, res("/workspace/last"))
		wantRejected(t, err, "bad", "at most 100 resources")
		cur, _ := st.GetSession(ctx, sess.ID)
		all, err := Resources(&cur)
		if err != nil || len(all) != MaxResources || all[0] != first {
			t.Fatalf("%d resources, first %+v, %v", len(all), all[0], err)
		}
		if err := f.svc.RemoveResource(ctx, sess.ID, first.ID); err != nil {
			t.Fatal(err)
		}
		err = f.svc.RemoveResource(ctx, sess.ID, first.ID)
		wantRejected(t, err, "not found", "resource "+first.ID+" of session")
		evs := f.log(sess.ID)
		if len(evs) != MaxResources+1 || evs[len(evs)-1].Type != ma.EventSessionUpdated {
			t.Fatalf("%d events, want one session.updated per change", len(evs))
		}
		f.set(sess.ID, func(s *ma.Session) { s.ArchivedAt = &s.UpdatedAt })
		err = f.svc.AddResource(ctx, sess.ID, res("/workspace/b"))
		wantRejected(t, err, "conflict", "archived and read-only")
		err = f.svc.RemoveResource(ctx, sess.ID, all[1].ID)
		wantRejected(t, err, "conflict", "archived and read-only")
	})
}

func TestArchiveAndDelete(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		sess := f.session()
		f.set(sess.ID, func(s *ma.Session) { s.Status = ma.StatusRunning })
		_, err := f.svc.Archive(ctx, sess.ID)
		wantRejected(t, err, "bad", "while it is running")
		_, err = f.svc.Delete(ctx, sess.ID)
		wantRejected(t, err, "bad", "while it is running")
		f.set(sess.ID, func(s *ma.Session) { s.Status = ma.StatusIdle })
		got, err := f.svc.Archive(ctx, sess.ID)
		if err != nil || got.ArchivedAt == nil {
			t.Fatalf("archived %+v, %v", got.ArchivedAt, err)
		}
		again, err := f.svc.Archive(ctx, sess.ID)
		if err != nil || *again.ArchivedAt != *got.ArchivedAt {
			t.Fatalf("archived again: %v, %v", again.ArchivedAt, err)
		}
		_, err = f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserMessage}}, nil)
		wantRejected(t, err, "conflict", "is archived; it accepts no events")
		gone, err := f.svc.Delete(ctx, sess.ID)
		if err != nil || gone.ID != sess.ID {
			t.Fatalf("deleted %q, %v", gone.ID, err)
		}
		if _, err := st.GetSession(ctx, sess.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if _, err := f.svc.Delete(ctx, sess.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delete again: %v", err)
		}
	})
}

// turn is the log of a turn waiting for the client: a confirmation of a1
// and a custom tool result for c1.
func turn(f *fixture, id string) {
	now := ma.Time(time.Now())
	f.runnerAppends(id,
		&ma.Event{Type: ma.EventStatusRunning, ProcessedAt: &now},
		&ma.Event{ID: "a1", Type: ma.EventAgentToolUse, Name: "bash", EvaluatedPermission: "ask", ProcessedAt: &now},
		&ma.Event{ID: "c1", Type: ma.EventAgentCustomToolUse, Name: "lookup", ProcessedAt: &now},
		&ma.Event{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRequiresAction, EventIDs: []string{"a1", "c1"}}, ProcessedAt: &now})
	f.set(id, func(s *ma.Session) { s.Status = ma.StatusIdle })
}

func TestSend(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		sess := f.session()
		turn(f, sess.ID)
		confirm := ma.Event{Type: ma.EventUserToolConfirmation, ToolUseID: "a1", Result: "allow"}
		evs, err := f.svc.Send(ctx, sess.ID, []ma.Event{confirm}, nil)
		if err != nil || evs[0].ProcessedAt == nil || evs[0].ID == "" {
			t.Fatalf("sent %+v, %v", evs, err)
		}
		// The view is warm now: a second confirmation of a1 is refused.
		_, err = f.svc.Send(ctx, sess.ID, []ma.Event{confirm}, nil)
		wantRejected(t, err, "bad", "a1 is not a tool use awaiting confirmation")
		_, err = f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserToolResult, ToolUseID: "c1"}}, nil)
		wantRejected(t, err, "bad", "awaiting a result from a self-hosted worker")
		// A system message may not trail a user message while the session
		// waits on requires_action.
		_, err = f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserMessage}, {Type: ma.EventSystemMessage}}, nil)
		wantRejected(t, err, "bad", "events[1]: the session is waiting for tool results")
		if _, err := f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserCustomToolResult, CustomToolUseID: "c1"}}, nil); err != nil {
			t.Fatal(err)
		}
		if _, interrupted := f.run.counts(); interrupted != 0 {
			t.Fatal("interrupted")
		}
		// An interrupt of a turn in progress stops the runner.
		if _, err := f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserInterrupt}}, nil); err != nil {
			t.Fatal(err)
		}
		if _, interrupted := f.run.counts(); interrupted != 1 {
			t.Fatal("not interrupted")
		}
		// On a fresh service (a cold view) the log says the same.
		cold := New(Config{Store: st, Bus: bus.New(), Runner: f.run})
		_, err = cold.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserCustomToolResult, CustomToolUseID: "c1"}}, nil)
		wantRejected(t, err, "bad", "c1 is not a custom tool use awaiting a result")
		f.set(sess.ID, func(s *ma.Session) { s.Status = ma.StatusTerminated })
		_, err = f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserMessage}}, nil)
		wantRejected(t, err, "conflict", "is terminated; it accepts no events")
	})
}

// countingStore counts the log reads made inside session transactions and
// runs between, if set, before each transaction starts (an append that
// lands between the read of the log and the transaction).
type countingStore struct {
	store.Store
	mu      sync.Mutex // guards the fields below
	inTx    int        // Tx.ReadLog calls
	tail    int        // entries they returned
	outside int        // Store.ReadLog calls
	between func()
}

func (s *countingStore) ReadLog(ctx context.Context, id string, after int64, limit int) ([]store.Entry, error) {
	s.mu.Lock()
	s.outside++
	s.mu.Unlock()
	return s.Store.ReadLog(ctx, id, after, limit)
}

func (s *countingStore) UpdateSession(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	s.mu.Lock()
	between := s.between
	s.between = nil
	s.mu.Unlock()
	if between != nil {
		between()
	}
	return s.Store.UpdateSession(ctx, id, func(tx store.Tx) error { return fn(countingTx{tx, s}) })
}

func (s *countingStore) counts() (inTx, tail, outside int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inTx, s.tail, s.outside
}

type countingTx struct {
	store.Tx
	s *countingStore
}

func (tx countingTx) ReadLog(after int64) ([]store.Entry, error) {
	entries, err := tx.Tx.ReadLog(after)
	tx.s.mu.Lock()
	tx.s.inTx++
	tx.s.tail += len(entries)
	tx.s.mu.Unlock()
	return entries, err
}

// TestSendReadsTheLogBeforeItsTransaction: with a cold view, what the
// session waits for is folded from its log before the write transaction
// (on SQLite every other write waits while one runs); inside it only what
// was appended meanwhile is read.
func TestSendReadsTheLogBeforeItsTransaction(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		sess := f.session()
		now := ma.Time(time.Now())
		for i := range 50 {
			f.runnerAppends(sess.ID, &ma.Event{Type: ma.EventAgentMessage, ProcessedAt: &now, Content: []ma.ContentBlock{{Type: "text", Text: fmt.Sprint("filler ", i)}}})
		}
		turn(f, sess.ID)
		cs := &countingStore{Store: st}
		svc := New(Config{Store: cs, Bus: bus.New(), Runner: f.run})
		if _, err := svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserToolConfirmation, ToolUseID: "a1", Result: "allow"}}, nil); err != nil {
			t.Fatal(err)
		}
		if inTx, _, outside := cs.counts(); inTx != 0 || outside == 0 {
			t.Fatalf("cold view: %d log reads inside the transaction, %d before it", inTx, outside)
		}
		// A tool use the runner appends between the read and the
		// transaction is read there, alone, and can be answered.
		cs.between = func() {
			f.runnerAppends(sess.ID, &ma.Event{ID: "a2", Type: ma.EventAgentToolUse, Name: "bash", EvaluatedPermission: "ask", ProcessedAt: &now})
		}
		cold := New(Config{Store: cs, Bus: bus.New(), Runner: f.run})
		if _, err := cold.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserToolConfirmation, ToolUseID: "a2", Result: "deny"}}, nil); err != nil {
			t.Fatal(err)
		}
		if inTx, tail, _ := cs.counts(); inTx != 1 || tail != 1 {
			t.Fatalf("after a concurrent append: %d reads inside the transaction, of %d entries; want 1 of 1", inTx, tail)
		}
	})
}
