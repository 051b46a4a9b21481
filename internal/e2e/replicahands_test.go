package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/toolhost"
	ma "github.com/reinsdev/reins/managedagents"
)

// whereCalled records which replica made each model call of a session.
type whereCalled struct {
	mu    sync.Mutex
	calls map[string][]string // session -> replicas, in call order
}

func (w *whereCalled) of(sessionID string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls[sessionID])
}

// replicaModel is a replica's scripted model: calls are counted in the
// shared counter and recorded with the replica's name.
type replicaModel struct {
	name  string
	inner *callCounter
	where *whereCalled
}

func (m replicaModel) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	m.where.mu.Lock()
	m.where.calls[req.SessionID] = append(m.where.calls[req.SessionID], m.name)
	m.where.mu.Unlock()
	return m.inner.Stream(ctx, req, sink)
}

// startExecutorClient connects an in-process executor (the executor
// package's client, over a real WebSocket) to a server with an environment
// key; its sessions work in subdirectories of the returned workspace.
func startExecutorClient(t *testing.T, url, key, name string) string {
	t.Helper()
	return startExecutorClientWith(t, url, key, name, nil)
}

// startExecutorClientWith is startExecutorClient with options adjusted
// by adjust (if not nil).
func startExecutorClientWith(t *testing.T, url, key, name string, adjust func(*executor.Options)) string {
	t.Helper()
	ws := t.TempDir()
	opts := executor.Options{URL: url, EnvironmentKey: key, Executor: executor.ExecutorInfo{Name: name},
		Workspace: ws, MaxSessions: 8, BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
	if adjust != nil {
		adjust(&opts)
	}
	registered := make(chan struct{})
	var once sync.Once
	onEvent := opts.OnEvent
	opts.OnEvent = func(e executor.Event) {
		if e.Type == executor.EventRegistered {
			once.Do(func() { close(registered) })
		}
		if onEvent != nil {
			onEvent(e)
		}
	}
	c := executor.NewClient(opts)
	go c.Run(context.Background())
	t.Cleanup(func() {
		c.Stop()
		<-c.Done()
	})
	// The client starts a sandbox before it connects: a test that calls
	// a tool right away would find no executor yet.
	select {
	case <-registered:
	case <-c.Done():
		t.Fatalf("executor %s stopped before it registered", name)
	case <-time.After(30 * time.Second):
		t.Fatalf("executor %s did not register within 30 s", name)
	}
	return ws
}

// firstToolLatency returns the time from the first agent.tool_use to its
// agent.tool_result, by their processed_at.
func firstToolLatency(t *testing.T, evs []frame) time.Duration {
	t.Helper()
	var use time.Time
	for _, f := range evs {
		if f.ProcessedAt == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, *f.ProcessedAt)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case ma.EventAgentToolUse:
			if use.IsZero() {
				use = at
			}
		case ma.EventAgentToolResult:
			return at.Sub(use)
		}
	}
	t.Fatalf("no tool result: %v", types(evs))
	return 0
}

// TestReplicaHandsExecutorOnAnotherReplica connects an executor of a
// self-hosted environment to one replica (A) only. Sessions are created
// on B and sent their turns on C, whose runner therefore starts there: the
// session moves to A when it needs its tools, each bash call runs once on
// A's executor, and the turn completes. A session waiting for an executor
// on C moves as soon as one connects to A. The extra latency of the first
// tool call, against sessions whose turn starts on A, is logged.
func TestReplicaHandsExecutorOnAnotherReplica(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	where := &whereCalled{calls: map[string][]string{}}
	replica := func(name string) *server {
		return startReplica(t, dsn, name, replicaModel{name: name, inner: calls, where: where})
	}
	a, b, c := replica("replica-a"), replica("replica-b"), replica("replica-c")
	envID, key := b.selfHosted(t, "hands")
	agent := b.newAgent(t, "scripted", toolset(false))
	script := func(tag string) string {
		return `@tool bash {"command":"echo ` + tag + ` >> runs.txt && cat runs.txt"}` + "\n@then done " + tag
	}
	check := func(ws, sessionID, tag string, evs []frame) {
		t.Helper()
		if last := evs[len(evs)-1]; last.StopReason == nil || last.StopReason.Type != "end_turn" {
			t.Fatalf("%s: turn ended %v", tag, types(evs))
		}
		for _, f := range evs {
			if f.Type == ma.EventAgentToolResult && (f.IsError != nil && *f.IsError || !strings.Contains(f.Content[0].Text, tag)) {
				t.Fatalf("%s: tool result %+v", tag, f.Content)
			}
		}
		data, err := os.ReadFile(filepath.Join(ws, sessionID, "runs.txt"))
		if err != nil || string(data) != tag+"\n" {
			t.Fatalf("%s: runs.txt on A's executor = %q, %v: want one run", tag, data, err)
		}
		entries := logOf(t, a.app.Store, sessionID)
		checkLog(t, sessionID, entries)
		if got := calls.of(sessionID); !slices.Equal(got, []int{1, 1}) {
			t.Fatalf("%s: model calls %v, want one per step", tag, got)
		}
		if n := countOf(entries, ma.EventAgentToolResult); n != 1 {
			t.Fatalf("%s: %d tool results", tag, n)
		}
	}

	// A session that waits for an executor on C moves when one connects
	// to A.
	waiting := b.newSession(t, agent.ID, envID).ID
	st := b.openStream(t, waiting)
	c.send(t, waiting, userMessage(script("waited")))
	st.until(func(f frame) bool { return f.Type == ma.EventStatusRescheduled })
	if l, err := a.app.Store.SessionLease(context.Background(), waiting); err != nil || !l.Live {
		t.Fatalf("lease of the waiting session %+v, %v", l, err)
	} else {
		t.Logf("the waiting session is on %s", l.Owner)
	}
	ws := startExecutorClient(t, a.url, key, "hands-on-a")
	check(ws, waiting, "waited", st.until(isIdle))

	// Sessions whose turn starts on C (remote hands) or on A (local).
	var remote, local []time.Duration
	for i := range 6 {
		for _, on := range []*server{c, a} {
			tag := fmt.Sprintf("run%d%s", i, map[*server]string{a: "a", c: "c"}[on])
			id := b.newSession(t, agent.ID, envID).ID
			st := on.openStream(t, id)
			on.send(t, id, userMessage(script(tag)))
			evs := st.until(isIdle)
			check(ws, id, tag, evs)
			d := firstToolLatency(t, evs)
			switch first := where.of(id)[0]; first {
			case "replica-a":
				local = append(local, d)
			default:
				remote = append(remote, d)
				if got := where.of(id); got[1] != "replica-a" {
					t.Fatalf("%s: model calls on %v: the step after the tool did not run on A", tag, got)
				}
			}
			st.cancel()
		}
	}
	if len(remote) == 0 {
		t.Fatal("no turn started away from the executor's replica")
	}
	t.Logf("first tool call, tool_use to tool_result: executor on another replica %v (median %v), on the owner %v (median %v)",
		remote, median(remote), local, median(local))
}

// median returns the median of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestReplicaCloudWorkspaceAfterTakeover runs a cloud session's first turn
// on one replica, which writes a file in its workspace, then crashes that
// replica: the replica that takes the session over runs the next turn in a
// fresh workspace, and its first tool result tells the model the workspace
// was reset. With the workspace root shared between the replicas the file
// is still there and nothing is said.
func TestReplicaCloudWorkspaceAfterTakeover(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "own disks", true: "shared root"}[shared], func(t *testing.T) {
			dsn := pgtest.FreshDB(t)
			calls := &callCounter{calls: map[string]int{}}
			root := t.TempDir()
			replica := func(id string) *server {
				dir := t.TempDir()
				if shared {
					if err := os.Symlink(root, filepath.Join(dir, "workspaces")); err != nil {
						t.Fatal(err)
					}
				}
				return startWith(t, options{models: model.Router{"scripted": calls}, dir: dir}, func(c *app.Config) {
					c.DatabaseURL, c.ReplicaID, c.LeaseTTL = dsn, id, replicaTTL
				})
			}
			replicas := map[string]*server{"replica-a": replica("replica-a"), "replica-b": replica("replica-b")}
			a := replicas["replica-a"]
			agent := a.newAgent(t, "scripted", toolset(false))
			id := a.newSession(t, agent.ID, a.newEnv(t, "cloud").ID).ID
			st := a.openStream(t, id)
			a.send(t, id, userMessage(`@tool bash {"command":"echo kept > kept.txt && echo wrote"}`+"\n@then wrote"))
			first := st.until(isIdle)
			if r := toolResults(first); len(r) != 1 || r[0] != "wrote" {
				t.Fatalf("first turn's tool results %q", r)
			}
			// The owner still holds the lease (its runner lingers): it
			// crashes, cut off its database.
			l, err := a.app.Store.SessionLease(context.Background(), id)
			if err != nil || !l.Live {
				t.Fatalf("lease after the first turn %+v, %v", l, err)
			}
			var survivor *server
			for name, s := range replicas {
				if name == l.Owner {
					s.app.Store.Close()
				} else {
					survivor = s
				}
			}
			sst := survivor.openStream(t, id)
			survivor.send(t, id, userMessage(`@tool bash {"command":"cat kept.txt 2>/dev/null || echo missing"}`+"\n@tool bash {\"command\":\"echo second\"}\n@then done"))
			var second []frame
			for {
				f := sst.next(30 * time.Second)
				second = append(second, f)
				if isIdle(f) && f.StopReason != nil && f.StopReason.Type == "end_turn" {
					break
				}
			}
			got := toolResults(second)
			want := []string{"kept", "second"}
			if !shared {
				want = []string{toolhost.WorkspaceResetNotice + "missing", "second"}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("tool results after the takeover:\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// toolResults returns the text of each agent.tool_result, its blocks
// joined.
func toolResults(evs []frame) []string {
	var out []string
	for _, f := range evs {
		if f.Type != ma.EventAgentToolResult {
			continue
		}
		var b strings.Builder
		for _, c := range f.Content {
			b.WriteString(strings.TrimSpace(c.Text))
		}
		out = append(out, b.String())
	}
	return out
}

// TestReplicaPullWorkerOnAnotherReplica runs the official environment
// worker against one replica (A) while its session is created on B and
// sent its turn on C: the work queue is in the database and its waiters
// are woken across replicas, so the worker gets the session's work and
// answers every tool use, once.
func TestReplicaPullWorkerOnAnotherReplica(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	a, b, c := startReplica(t, dsn, "replica-a", calls), startReplica(t, dsn, "replica-b", calls), startReplica(t, dsn, "replica-c", calls)
	envID, key := b.selfHosted(t, "pull")
	agent := b.newAgent(t, "scripted", toolset(false))
	id := b.newSession(t, agent.ID, envID).ID
	st := c.openStream(t, id)

	workdir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	idle := 2 * time.Second
	worker := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(a.url), option.WithMaxRetries(0)),
		environments.EnvironmentWorkerOptions{EnvironmentID: envID, EnvironmentKey: key, Workdir: workdir, MaxIdle: &idle,
			Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	c.send(t, id, userMessage(`@tool bash {"command":"echo ran >> runs.txt && cat runs.txt"}`+"\n@then done"))
	got := st.until(func(f frame) bool { return isIdle(f) && f.StopReason != nil && f.StopReason.Type == "end_turn" })
	results := 0
	for _, f := range got {
		switch f.Type {
		case ma.EventUserToolResult:
			if f.ProcessedAt != nil {
				results++
			}
		case ma.EventAgentToolResult:
			t.Fatalf("a server ran a tool of a pull worker's session: %+v", f)
		}
	}
	if results != 1 {
		t.Fatalf("%d user.tool_result, want 1: %v", results, types(got))
	}
	if data, err := os.ReadFile(filepath.Join(workdir, "runs.txt")); err != nil || string(data) != "ran\n" {
		t.Fatalf("runs.txt in the worker's workdir = %q, %v: want one run", data, err)
	}
	if got := calls.of(id); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("model calls %v, want one per step", got)
	}
	checkLog(t, id, logOf(t, a.app.Store, id))
}

// TestReplicaCloudSessionReturnsToItsWorkspace runs a cloud session's
// first turn on one replica, which writes a file in its workspace; the
// session goes idle and its runner leaves (a short linger). Its next turns
// are sent to the other replica; one that wakes the session there moves
// back to the replica holding the workspace before its first tool call,
// finds the file, and the model is told nothing was reset.
func TestReplicaCloudSessionReturnsToItsWorkspace(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	where := &whereCalled{calls: map[string][]string{}}
	replica := func(id string) *server {
		return startWith(t, options{models: model.Router{"scripted": replicaModel{name: id, inner: calls, where: where}}}, func(c *app.Config) {
			c.DatabaseURL, c.ReplicaID, c.LeaseTTL, c.IdleLinger = dsn, id, replicaTTL, 50*time.Millisecond
		})
	}
	a, b := replica("replica-a"), replica("replica-b")
	agent := a.newAgent(t, "scripted", toolset(false))
	id := a.newSession(t, agent.ID, a.newEnv(t, "cloud").ID).ID
	st := a.openStream(t, id)
	a.send(t, id, userMessage(`@tool bash {"command":"echo kept > kept.txt && echo wrote"}`+"\n@then wrote"))
	if r := toolResults(st.until(isIdle)); len(r) != 1 || r[0] != "wrote" {
		t.Fatalf("first turn's tool results %q", r)
	}
	owner := where.of(id)[0]
	other := map[string]*server{"replica-a": b, "replica-b": a}[owner]
	ost := other.openStream(t, id)
	// Which replica wakes the session is a race between them: send until
	// a turn starts on the other one.
	for turn := 0; ; turn++ {
		if turn == 20 {
			t.Fatalf("20 turns sent to the other replica all started on the owner: %v", where.of(id))
		}
		waitUntil(t, "the runner to leave", func() bool {
			l, err := a.app.Store.SessionLease(context.Background(), id)
			return err == nil && !l.Live
		})
		before := len(where.of(id))
		other.send(t, id, userMessage(`@tool bash {"command":"cat kept.txt 2>/dev/null || echo missing"}`+"\n@then done"))
		if got := toolResults(ost.until(isIdle)); !slices.Equal(got, []string{"kept"}) {
			t.Fatalf("turn %d: tool results %q (model calls on %v)", turn, got, where.of(id))
		}
		calls := where.of(id)[before:]
		if calls[0] == owner {
			continue
		}
		if calls[len(calls)-1] != owner {
			t.Fatalf("turn %d: model calls on %v: the turn did not end on %s, which holds the workspace", turn, calls, owner)
		}
		t.Logf("turn %d started on the other replica and ended on the owner: %v", turn, calls)
		return
	}
}
