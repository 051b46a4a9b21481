package harness

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/storetest"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// panickyModel answers "ok", or a bash tool use when withTool is set and
// the transcript does not end with a tool result. It panics on the calls
// of session victim while panics is set.
type panickyModel struct {
	mu       sync.Mutex
	victim   string
	panics   bool
	withTool bool
	calls    map[string]int
}

func (m *panickyModel) Stream(_ context.Context, req *model.Request, _ model.Sink) (*model.Response, error) {
	m.mu.Lock()
	m.calls[req.SessionID]++
	boom := m.panics && req.SessionID == m.victim
	withTool := m.withTool
	m.mu.Unlock()
	if boom {
		panic("model provider bug")
	}
	msgs := req.Messages
	answered := false
	if len(msgs) > 0 {
		c := msgs[len(msgs)-1].Content
		answered = len(c) > 0 && c[len(c)-1].Type == model.BlockToolResult
	}
	if withTool && !answered {
		return &model.Response{Content: []model.Block{{Type: model.BlockToolUse, ID: "toolu_1", Name: "bash", Input: []byte(`{"command":"true"}`)}}, StopReason: model.StopToolUse}, nil
	}
	return &model.Response{Content: []model.Block{{Type: model.BlockText, Text: "ok"}}, StopReason: model.StopEndTurn}, nil
}

func (m *panickyModel) set(panics bool) { m.mu.Lock(); m.panics = panics; m.mu.Unlock() }

func (m *panickyModel) count(sid string) int { m.mu.Lock(); defer m.mu.Unlock(); return m.calls[sid] }

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }

// panickyTools panics on every call while panics is set.
type panickyTools struct {
	mu     sync.Mutex
	panics bool
	calls  int
}

func (p *panickyTools) RunTool(context.Context, *ma.Session, tool.Call) tool.Result {
	p.mu.Lock()
	p.calls++
	boom := p.panics
	p.mu.Unlock()
	if boom {
		panic("tool runner bug")
	}
	return tool.Result{Content: []ma.ContentBlock{{Type: "text", Text: "done"}}}
}

// session creates another idle session in f's store, with the agent
// toolset when tools is set.
func (f *fixture) session(tools bool) string {
	f.t.Helper()
	agent := ma.SessionAgent{ID: "agent_x", Model: ma.ModelConfig{ID: "fake"}}
	if tools {
		agent.Tools = []ma.Tool{{Type: ma.ToolTypeAgentToolset, DefaultConfig: &ma.ToolConfig{Enabled: true, PermissionPolicy: &ma.PermissionPolicy{Type: ma.PolicyAlwaysAllow}}}}
	}
	now := ma.Time(time.Now())
	s, err := storetest.NewSession(context.Background(), f.st, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
		Agent: agent, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		f.t.Fatal(err)
	}
	return s.ID
}

// on returns a fixture for session sid that shares f's store and harness.
func (f *fixture) on(sid string) *fixture { g := *f; g.sid = sid; return &g }

// restart replaces f's harness with one built from cfg (Store and Bus
// filled in).
func (f *fixture) restart(cfg Config) {
	f.h.Stop(context.Background())
	if cfg.Store == nil {
		cfg.Store = f.st
	}
	if cfg.Writer == nil {
		cfg.Writer = sessions.NewWriter(f.st)
	}
	cfg.Bus = bus.New()
	f.h = New(cfg)
	f.t.Cleanup(func() { f.h.Stop(context.Background()) })
}

func TestModelPanicRetriesThenExhausts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		victim, other := f.on(f.session(false)), f.on(f.session(false))
		pm := &panickyModel{victim: victim.sid, panics: true, calls: map[string]int{}}
		logs := &lockedBuffer{}
		f.restart(Config{Model: pm, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		victim.h, other.h = f.h, f.h

		victim.message("hi")
		other.message("hello")
		time.Sleep(time.Minute)
		synctest.Wait()
		evs := victim.events()
		if got := errorsOf(evs); !slices.Equal(got, []string{"unknown_error/retrying", "unknown_error/exhausted"}) {
			t.Fatalf("errors %v", got)
		}
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason.Type != ma.StopRetriesExhausted || victim.status() != ma.StatusIdle {
			t.Fatalf("victim %+v, status %s", idle.StopReason, victim.status())
		}
		if n := pm.count(victim.sid); n != 2 {
			t.Fatalf("%d model calls for the panicking session, want 2", n)
		}
		if idle := last(other.events(), ma.EventStatusIdle); idle.StopReason == nil || idle.StopReason.Type != ma.StopEndTurn {
			t.Fatal("the other session did not complete its turn")
		}
		if l := logs.String(); !strings.Contains(l, "level=ERROR msg=\"session runner panicked\"") || !strings.Contains(l, "panickyModel") {
			t.Fatalf("the panic and its stack are not logged at Error:\n%s", l)
		}
		// The harness still serves the session once the bug is gone.
		pm.set(false)
		victim.message("again")
		time.Sleep(time.Second)
		synctest.Wait()
		if idle := last(victim.events(), ma.EventStatusIdle); idle.StopReason.Type != ma.StopEndTurn {
			t.Fatalf("after the panics: %+v", idle.StopReason)
		}
	})
}

func TestToolPanicRetriedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.sid = f.session(true)
		pm := &panickyModel{withTool: true, calls: map[string]int{}}
		tools := &panickyTools{panics: true}
		f.restart(Config{Model: pm, Tools: tools})

		f.message("run it")
		time.Sleep(time.Minute)
		synctest.Wait()
		evs := f.events()
		if got := errorsOf(evs); !slices.Equal(got, []string{"unknown_error/retrying", "unknown_error/exhausted"}) {
			t.Fatalf("errors %v", got)
		}
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason.Type != ma.StopRetriesExhausted || tools.calls != 2 {
			t.Fatalf("idle %+v after %d tool calls", idle.StopReason, tools.calls)
		}
		var marked []string
		if _, err := storetest.Change(context.Background(), f.st, f.sid, func(tx store.Tx) (err error) {
			marked, err = tx.ToolsRunning()
			return err
		}); err != nil || len(marked) != 0 {
			t.Fatalf("tools left marked running: %v %v", marked, err)
		}
		// A new turn runs the tool and ends normally.
		tools.mu.Lock()
		tools.panics = false
		tools.mu.Unlock()
		f.message("again")
		time.Sleep(time.Second)
		synctest.Wait()
		evs = f.events()
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason.Type != ma.StopEndTurn || tools.calls != 3 {
			t.Fatalf("new turn: %+v after %d tool calls", idle.StopReason, tools.calls)
		}
	})
}

// panickyTx panics on Append.
type panickyTx struct{ store.Tx }

func (panickyTx) Append(...*ma.Event) error { panic("append bug") }

// txPanicStore runs the transaction functions of the harness with a Tx
// that panics, while broken is set.
type txPanicStore struct {
	store.Store
	mu     sync.Mutex
	broken bool
}

func (s *txPanicStore) Update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	s.mu.Lock()
	broken := s.broken
	s.mu.Unlock()
	w := sessions.NewWriter(s.Store)
	if !broken {
		return w.Update(ctx, id, fn)
	}
	return w.Update(ctx, id, func(tx store.Tx) error { return fn(panickyTx{tx}) })
}

func TestPanicInTransactionStopsTheRunnerOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ps := &txPanicStore{Store: f.st, broken: true}
		f.restart(Config{Store: ps, Writer: ps, Model: f.model})
		f.message("hi")
		time.Sleep(time.Minute)
		synctest.Wait()
		// Nothing could be recorded; the runner left and the next wake-up
		// starts the turn.
		ps.mu.Lock()
		ps.broken = false
		ps.mu.Unlock()
		f.h.Wake(f.sid)
		time.Sleep(time.Second)
		synctest.Wait()
		if idle := last(f.events(), ma.EventStatusIdle); idle.StopReason == nil || idle.StopReason.Type != ma.StopEndTurn {
			t.Fatal("the turn did not run after the store recovered")
		}
	})
}

// wakeOnFailStore fails the first n session updates; the last failure
// calls onLast first (a wake-up that arrives while the runner gives up).
type wakeOnFailStore struct {
	store.Store
	mu     sync.Mutex
	n      int
	onLast func()
}

func (s *wakeOnFailStore) Update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	s.mu.Lock()
	fail := s.n > 0
	s.n--
	lastFail := s.n == 0
	s.mu.Unlock()
	if !fail {
		return sessions.NewWriter(s.Store).Update(ctx, id, fn)
	}
	if lastFail {
		s.onLast()
	}
	return ma.Session{}, errors.New("disk on fire")
}

func TestWakeWhileRunnerGivesUpIsNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		// The turn's first transaction fails, then recording the failure
		// fails too (the runner gives up), and a wake-up arrives meanwhile.
		ws := &wakeOnFailStore{Store: f.st, n: 2}
		f.restart(Config{Store: ws, Writer: ws, Model: f.model})
		ws.onLast = func() { f.h.Wake(f.sid) }
		f.message("hi")
		time.Sleep(time.Minute)
		synctest.Wait()
		f.message("again")
		time.Sleep(time.Minute)
		synctest.Wait()
		evs := f.events()
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason == nil || idle.StopReason.Type != ma.StopEndTurn {
			t.Fatalf("the session is stuck: status %s", f.status())
		}
		answers := 0
		for _, e := range evs {
			if e.Type == ma.EventAgentMessage {
				answers++
			}
		}
		if answers == 0 {
			t.Fatal("no answer")
		}
	})
}
