package e2e

// Replicas as real processes: three `reins serve` (the binary cmd/reins
// builds, see buildReins) on one fresh PostgreSQL database, killed,
// terminated, restarted and frozen with real signals. Every replica calls
// one fake Messages API, at a base URL of its own, so that model calls are
// counted per (session, conversation position) across processes and
// attributed to their replica; every bash run of a turn calls one HTTP
// endpoint of the test (the cloud sessions' tools run on this host with
// --sandbox=none, and curl reaches loopback), so bash runs are counted the
// same way. Both can hold their answers to keep turns in flight.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/toolhost"
	ma "github.com/reinsdev/reins/managedagents"
	toolsetpkg "github.com/reinsdev/reins/tools/toolset"
)

// callKey names one step of a conversation: a session and the number of
// messages the model call carries (a bash run uses its tool use's).
func callKey(sid string, pos int) string { return fmt.Sprintf("%s/%d", sid, pos) }

// holdGate holds calls until it opens.
type holdGate struct {
	mu   sync.Mutex
	hold func(replica, sid string, pos int) bool
	open chan struct{}
}

// set holds from now on the calls hold picks (nil: none), until release.
func (g *holdGate) set(hold func(replica, sid string, pos int) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.open = hold, make(chan struct{})
}

// release lets every held call go and holds no more.
func (g *holdGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil {
		close(g.open)
	}
	g.hold, g.open = nil, nil
}

// wait holds a call if it is picked, until the gate opens, the caller
// goes or done closes; it reports whether the caller is still there.
func (g *holdGate) wait(r *http.Request, done <-chan struct{}, replica, sid string, pos int, held func(delta int)) bool {
	g.mu.Lock()
	open := g.open
	hold := g.hold != nil && g.hold(replica, sid, pos)
	g.mu.Unlock()
	if !hold {
		return r.Context().Err() == nil
	}
	held(1)
	defer held(-1)
	select {
	case <-open:
	case <-r.Context().Done():
	case <-done:
	}
	return r.Context().Err() == nil
}

// modelCalls are the calls of one conversation step.
type modelCalls struct {
	replicas []string    // the replica of each call, in order
	at       []time.Time // when each arrived
	answered int         // answers written in full to a caller still there
	cut      []string    // replicas whose call ended before its answer
}

// modelFake is the Messages API every replica calls at /r/<replica>. It
// answers a user message with a bash tool use (curl to the bash endpoint,
// naming the step) and a tool result with a closing text, streaming each
// answer with delay between events.
type modelFake struct {
	t     *testing.T
	srv   *httptest.Server
	done  chan struct{}
	bash  string // the bash endpoint's URL
	delay time.Duration
	gate  holdGate

	mu    sync.Mutex
	calls map[string]*modelCalls
	held  map[string]int // held calls by replica
	bad   []string       // calls that could not be read
	next  int
}

func newModelFake(t *testing.T, bashURL string) *modelFake {
	f := &modelFake{t: t, done: make(chan struct{}), bash: bashURL, calls: map[string]*modelCalls{}, held: map[string]int{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(func() {
		close(f.done)
		f.srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.bad) > 0 {
			t.Errorf("model fake: calls it could not read: %v", f.bad)
		}
	})
	return f
}

// baseURL is the Messages API's base URL for a replica.
func (f *modelFake) baseURL(replica string) string { return f.srv.URL + "/r/" + replica }

// wireMessage is a message of a Messages API request.
type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// blocks returns the content blocks of a message (a string is one text
// block).
func (m wireMessage) blocks() []struct{ Type, Text string } {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []struct{ Type, Text string }{{"text", s}}
	}
	var bs []struct{ Type, Text string }
	json.Unmarshal(m.Content, &bs)
	return bs
}

// jobRx finds the session a conversation is about in its first message.
var jobRx = regexp.MustCompile(`job (sesn_\w+)`)

func (f *modelFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/r/")
	replica, ok2 := strings.CutSuffix(rest, "/v1/messages")
	var body map[string]any
	var req struct{ Messages []wireMessage }
	raw := new(bytes.Buffer)
	raw.ReadFrom(r.Body)
	json.Unmarshal(raw.Bytes(), &body)
	json.Unmarshal(raw.Bytes(), &req)
	var sid string
	if len(req.Messages) > 0 {
		for _, b := range req.Messages[0].blocks() {
			if m := jobRx.FindStringSubmatch(b.Text); m != nil {
				sid = m[1]
			}
		}
	}
	if !ok || !ok2 || r.Method != http.MethodPost || sid == "" {
		f.mu.Lock()
		f.bad = append(f.bad, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"model fake: unknown call"}}`, http.StatusNotFound)
		return
	}
	pos := len(req.Messages)
	last := req.Messages[pos-1]
	toolResult := slices.ContainsFunc(last.blocks(), func(b struct{ Type, Text string }) bool { return b.Type == "tool_result" })
	key := callKey(sid, pos)
	f.mu.Lock()
	c := f.calls[key]
	if c == nil {
		c = &modelCalls{}
		f.calls[key] = c
	}
	c.replicas = append(c.replicas, replica)
	c.at = append(c.at, time.Now())
	f.next++
	id := fmt.Sprintf("toolu_%06d", f.next)
	f.mu.Unlock()

	there := f.gate.wait(r, f.done, replica, sid, pos, func(d int) {
		f.mu.Lock()
		f.held[replica] += d
		f.mu.Unlock()
	})
	if there {
		var resp fakeanthropic.Response
		if toolResult {
			resp = fakeanthropic.Text("done " + sid)
		} else {
			input, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("curl -sf %s/bash/%s/%d", f.bash, sid, pos)})
			resp = fakeanthropic.Reply(fakeanthropic.ToolUseBlock(id, "bash", string(input)))
		}
		fakeanthropic.Write(w, r, body, resp.WithDelay(f.delay), f.done)
		there = r.Context().Err() == nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if there {
		c.answered++
	} else {
		c.cut = append(c.cut, replica)
	}
}

// step returns a copy of the calls of a conversation step.
func (f *modelFake) step(sid string, pos int) modelCalls {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.calls[callKey(sid, pos)]; c != nil {
		return modelCalls{replicas: slices.Clone(c.replicas), at: slices.Clone(c.at), answered: c.answered, cut: slices.Clone(c.cut)}
	}
	return modelCalls{}
}

// heldBy returns how many calls of a replica are held now.
func (f *modelFake) heldBy(replica string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[replica]
}

// bashEndpoint counts the bash runs of each conversation step: each runs
// `curl …/bash/<session>/<pos>`.
type bashEndpoint struct {
	srv   *httptest.Server
	done  chan struct{}
	delay time.Duration // before each answer
	gate  holdGate

	mu   sync.Mutex
	runs map[string]int
	at   map[string]time.Time // the first run of each step
	held int
}

func newBashEndpoint(t *testing.T) *bashEndpoint {
	b := &bashEndpoint{done: make(chan struct{}), runs: map[string]int{}, at: map[string]time.Time{}}
	b.srv = httptest.NewServer(b)
	t.Cleanup(func() {
		close(b.done)
		b.srv.Close()
	})
	return b
}

var bashPathRx = regexp.MustCompile(`^/bash/(sesn_\w+)/(\d+)$`)

func (b *bashEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := bashPathRx.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.NotFound(w, r)
		return
	}
	var pos int
	fmt.Sscan(m[2], &pos)
	key := callKey(m[1], pos)
	b.mu.Lock()
	b.runs[key]++
	if _, ok := b.at[key]; !ok {
		b.at[key] = time.Now()
	}
	b.mu.Unlock()
	b.gate.wait(r, b.done, "", m[1], pos, func(d int) {
		b.mu.Lock()
		b.held += d
		b.mu.Unlock()
	})
	if b.delay > 0 {
		select {
		case <-time.After(b.delay):
		case <-r.Context().Done():
		case <-b.done:
		}
	}
	fmt.Fprintf(w, "ran %s\n", key)
}

func (b *bashEndpoint) runsOf(sid string, pos int) (int, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[callKey(sid, pos)], b.at[callKey(sid, pos)]
}

func (b *bashEndpoint) heldNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// syncBuffer is a process's output, written and read concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// replicaProc is one `reins serve` replica; its server holds the SDK client
// (no app: the process is not this one).
type replicaProc struct {
	*server
	id, addr, dataDir string
	cmd               *exec.Cmd
	out               *syncBuffer // stderr of every run, in order
	exited            chan struct{}
	waitErr           error // cmd.Wait's, once exited is closed
}

// procCluster is the replicas on one database and the fakes they call.
type procCluster struct {
	t     *testing.T
	bin   string
	dsn   string
	key   string
	ttl   time.Duration
	model *modelFake
	bash  *bashEndpoint
	store store.Store // the database, for the tests' reads
	procs []*replicaProc
	hc    *http.Client
	agent string
	envID string
}

// newProcCluster starts n replicas named replica-0… with lease ttl on a fresh
// database, and creates an agent (bash enabled) and a cloud environment.
func newProcCluster(t *testing.T, n int, ttl time.Duration) *procCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("builds reins and runs replicas as processes")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	c := &procCluster{t: t, bin: bin, dsn: pgtest.FreshDB(t), key: "sk-reins-replica-test-key", ttl: ttl,
		hc: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	c.bash = newBashEndpoint(t)
	c.model = newModelFake(t, c.bash.srv.URL)
	t.Cleanup(func() {
		for _, p := range c.procs {
			if p.cmd != nil {
				p.cmd.Process.Kill() // stopped ones too
				<-p.exited
			}
			if strings.Contains(p.out.String(), "DATA RACE") || strings.Contains(p.out.String(), "panic:") {
				t.Errorf("%s crashed or raced:\n%s", p.id, p.out.String())
			}
		}
		c.hc.CloseIdleConnections()
	})
	for i := range n {
		p := &replicaProc{id: fmt.Sprintf("replica-%d", i), addr: freeAddr(t), dataDir: t.TempDir(), out: &syncBuffer{}}
		p.server = &server{url: "http://" + p.addr, key: c.key}
		p.client = anthropic.NewClient(option.WithBaseURL(p.url), option.WithAPIKey(c.key), option.WithMaxRetries(0), option.WithHTTPClient(c.hc))
		c.procs = append(c.procs, p)
		// One at a time: the first start seeds the database.
		c.start(p)
	}
	st, err := postgres.Open(context.Background(), c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c.store = st
	c.agent = c.procs[0].newAgent(t, provider.DefaultModel, toolset(false)).ID
	c.envID = c.procs[0].newEnv(t, "cloud").ID
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.procs {
				t.Logf("--- %s:\n%s", p.id, lastLines(p.out.String(), 60))
			}
		}
	})
	return c
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// childEnv is this process's environment without its REINS_, ANTHROPIC_
// and OPENAI_ settings: a child reins serve gets only the test's.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "REINS_") && !strings.HasPrefix(name, "ANTHROPIC_") && !strings.HasPrefix(name, "OPENAI_") {
			env = append(env, kv)
		}
	}
	return env
}

// start runs p's process and waits until it serves.
func (c *procCluster) start(p *replicaProc) {
	c.t.Helper()
	env := childEnv()
	cmd := exec.Command(c.bin, "serve", "--addr", p.addr, "--data-dir", p.dataDir, "--database-url", c.dsn,
		"--replica-id", p.id, "--lease-ttl", c.ttl.String(), "--sandbox", "none",
		"--anthropic-api-key", "test-key", "--anthropic-base-url", c.model.baseURL(p.id),
		"--requests-per-minute", "0", "--creates-per-minute", "0", "--streams-per-key", "0", "--shutdown-grace", "20s")
	cmd.Env = append(env, "REINS_API_KEY="+c.key, "REINS_MASTER_KEY="+base64.StdEncoding.EncodeToString([]byte(replicasMasterKey)))
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			c.t.Fatalf("%s exited at start (%v):\n%s", p.id, p.waitErr, p.out.String())
		default:
		}
		if resp, err := c.hc.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("%s did not serve within 30s:\n%s", p.id, p.out.String())
}

// signal sends sig to p's process.
func (p *replicaProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.id, err)
	}
}

// waitExit waits for p's process to end and returns cmd.Wait's error.
func (p *replicaProc) waitExit(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		p.cmd = nil
		return p.waitErr
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v:\n%s", p.id, within, lastLines(p.out.String(), 40))
		return nil
	}
}

// pollUntil waits until cond holds, failing after within.
func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// entries reads a session's whole log.
func (c *procCluster) entries(sid string) []store.Entry {
	c.t.Helper()
	return logOf(c.t, c.store, sid)
}

// turnsEnded counts the session's turns that ended (idle, end_turn).
func turnsEnded(entries []store.Entry) int {
	n := 0
	for _, e := range entries {
		if e.Event.Type == ma.EventStatusIdle && e.Event.StopReason != nil && e.Event.StopReason.Type == ma.StopEndTurn {
			n++
		}
	}
	return n
}

// owners returns the live owner of each session's lease ("" for none).
func (c *procCluster) owners(sids []string) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, sid := range sids {
		l, err := c.store.SessionLease(context.Background(), sid)
		if err != nil {
			c.t.Fatal(err)
		}
		if l.Live {
			out[sid] = l.Owner
		}
	}
	return out
}

// checkTurns checks a session's log after its turns: gap-free, no event
// twice, each turn a bash run and two model calls answered once each
// (the tool result says "may or may not have run" where mayHaveRun), no
// session.error, and the model and bash counters agree.
func (c *procCluster) checkTurns(sid string, turns int, mayHaveRun bool) []store.Entry {
	c.t.Helper()
	entries := c.entries(sid)
	checkLog(c.t, sid, entries)
	if got := turnsEnded(entries); got != turns {
		c.t.Fatalf("session %s: %d turns ended, want %d", sid, got, turns)
	}
	if n := countOf(entries, ma.EventSessionError); n != 0 {
		c.t.Fatalf("session %s: %d session.error events", sid, n)
	}
	for _, typ := range []string{ma.EventAgentToolUse, ma.EventAgentToolResult} {
		if n := countOf(entries, typ); n != turns {
			c.t.Fatalf("session %s: %d %s for %d turns", sid, n, typ, turns)
		}
	}
	for _, e := range entries {
		if e.Event.Type != ma.EventAgentToolResult {
			continue
		}
		text := ""
		for _, b := range e.Event.Content {
			text += b.Text
		}
		isErr := e.Event.IsError != nil && *e.Event.IsError
		// A session that moved to another process (each has its own
		// workspaces) is told its workspace was reset, before the output.
		text = strings.TrimPrefix(text, toolhost.WorkspaceResetNotice)
		switch {
		case mayHaveRun && (!isErr || !strings.Contains(text, toolsetpkg.MayHaveRunText)):
			c.t.Fatalf("session %s: a bash cut off by the crash was answered %q", sid, text)
		case !mayHaveRun && (isErr || !strings.HasPrefix(text, "ran ")):
			c.t.Fatalf("session %s: bash answered %q (error %v)", sid, text, isErr)
		}
	}
	// Turn k's steps are at positions 4k+1 (the user message: a bash
	// tool use) and 4k+3 (its result: the closing text).
	for k := range turns {
		for _, pos := range []int{4*k + 1, 4*k + 3} {
			mc := c.model.step(sid, pos)
			if mc.answered != 1 || len(mc.replicas) != 1+len(mc.cut) {
				c.t.Fatalf("session %s, step %d: model calls by %v, %d answered, cut off on %v: want one answered", sid, pos, mc.replicas, mc.answered, mc.cut)
			}
		}
		if runs, _ := c.bash.runsOf(sid, 4*k+1); runs != 1 {
			c.t.Fatalf("session %s, turn %d: bash ran %d times", sid, k, runs)
		}
	}
	return entries
}

// jobMessage is the user message of turn k of a session.
func jobMessage(sid string, k int) anthropic.BetaManagedAgentsEventParamsUnion {
	return userMessage(fmt.Sprintf("job %s turn %d", sid, k))
}

// TestReplicaProcessesSurviveKill runs 30 sessions on three replica
// processes, each created on one, sent its message on another and
// streamed from all three. With every session mid-turn (half in a model
// call, half in a bash run, both held), the replica that runs the most of
// both kinds is SIGKILLed. Every session finishes within the lease TTL and a
// margin; each model call is answered once per step (calls cut off by the
// kill are redone, never answered twice), each bash runs once (those cut
// off by the kill are answered "may or may not have run"), the logs are
// gap-free without duplicates, and every stream on a surviving replica
// saw every event.
func TestReplicaProcessesSurviveKill(t *testing.T) {
	c := newProcCluster(t, 3, 2*time.Second)
	const n = 30
	sids := make([]string, n)
	inModel := map[string]bool{} // else in bash at the kill
	for i := range sids {
		sids[i] = c.procs[i%3].newSession(t, c.agent, c.envID).ID
		inModel[sids[i]] = i%2 == 0
	}
	c.model.gate.set(func(_, sid string, pos int) bool { return pos == 1 && inModel[sid] })
	c.bash.gate.set(func(_, sid string, _ int) bool { return !inModel[sid] })
	streams := make([][]*stream, n) // by session, by replica
	var wg sync.WaitGroup
	for i, sid := range sids {
		streams[i] = make([]*stream, 3)
		for j, p := range c.procs {
			wg.Go(func() { streams[i][j] = p.openStream(t, sid) })
		}
	}
	wg.Wait()
	for i, sid := range sids {
		c.procs[(i+1)%3].send(t, sid, jobMessage(sid, 0))
	}
	pollUntil(t, 30*time.Second, "every session mid-turn", func() bool {
		held := 0
		for _, p := range c.procs {
			held += c.model.heldBy(p.id)
		}
		return held == n/2 && c.bash.heldNow() == n/2
	})
	owners := c.owners(sids)
	score := func(id string) (model, bash int) {
		for sid, o := range owners {
			if o != id {
				continue
			}
			if inModel[sid] {
				model++
			} else {
				bash++
			}
		}
		return model, bash
	}
	victim := c.procs[0]
	for _, p := range c.procs[1:] {
		pm, pb := score(p.id)
		vm, vb := score(victim.id)
		if min(pm, pb) > min(vm, vb) {
			victim = p
		}
	}
	vm, vb := score(victim.id)
	if vm == 0 || vb == 0 {
		t.Fatalf("leases %v: no replica runs sessions in both a model call and a bash run", owners)
	}
	killed := time.Now()
	victim.signal(t, syscall.SIGKILL)
	victim.waitExit(t, 10*time.Second)
	// Its held model calls end with it; then every hold is released.
	pollUntil(t, 10*time.Second, "the killed replica's calls cut off", func() bool { return c.model.heldBy(victim.id) == 0 })
	c.model.gate.release()
	c.bash.gate.release()
	for i, sid := range sids {
		for j, p := range c.procs {
			if p == victim {
				continue
			}
			got := streams[i][j].until(isIdle)
			entries := c.entries(sid)
			first := slices.IndexFunc(entries, func(e store.Entry) bool { return e.Event.Type == ma.EventUserMessage })
			var want, seen []string
			for _, e := range entries[first:] {
				want = append(want, e.Event.Type+" "+e.Event.ID)
			}
			for _, f := range got {
				seen = append(seen, f.Type+" "+f.ID)
			}
			if !slices.Equal(seen, want) {
				t.Fatalf("session %s: the stream on %s saw\n%v\nthe log has\n%v", sid, p.id, seen, want)
			}
		}
	}
	took := time.Since(killed)
	t.Logf("SIGKILL of %s (%d sessions in a model call, %d in bash): every session finished %v later (lease ttl %v)", victim.id, vm, vb, took, c.ttl)
	if margin := 10 * time.Second; took > c.ttl+margin {
		t.Fatalf("the sessions finished %v after the kill, over ttl %v + %v", took, c.ttl, margin)
	}
	for _, sid := range sids {
		cutOff := owners[sid] == victim.id && !inModel[sid]
		c.checkTurns(sid, 1, cutOff)
		if mc := c.model.step(sid, 1); len(mc.cut) > 0 && (owners[sid] != victim.id || !inModel[sid] || slices.ContainsFunc(mc.cut, func(r string) bool { return r != victim.id })) {
			t.Fatalf("session %s (owner %s): model call cut off on %v", sid, owners[sid], mc.cut)
		}
	}
}

// redone returns the steps of a session's turns whose model call was made
// more than once, with the replicas that made them.
func (c *procCluster) redone(sid string, turns int) []string {
	var out []string
	for k := range turns {
		for _, pos := range []int{4*k + 1, 4*k + 3} {
			if mc := c.model.step(sid, pos); len(mc.replicas) != 1 {
				out = append(out, fmt.Sprintf("%s: %v", callKey(sid, pos), mc.replicas))
			}
		}
	}
	return out
}

// processedAt returns when an event was logged.
func processedAt(t *testing.T, ev ma.Event) time.Time {
	t.Helper()
	if ev.ProcessedAt == nil {
		t.Fatalf("event %s (%s) has no processed_at", ev.ID, ev.Type)
	}
	at, err := time.Parse(time.RFC3339Nano, *ev.ProcessedAt)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestReplicaProcessesDrainHandsOver SIGTERMs a replica whose sessions
// are in a model call (held until its drain began): each call finishes
// and is recorded there, not redone, and the other replica continues each
// session at once, told by the draining one, long before its sweep would
// (a lease of 30 s: a sweep every 15 s). It logs the hand-over times.
func TestReplicaProcessesDrainHandsOver(t *testing.T) {
	c := newProcCluster(t, 2, 30*time.Second)
	a, b := c.procs[0], c.procs[1]
	const n = 6
	sids := make([]string, n)
	c.model.gate.set(func(_ string, _ string, pos int) bool { return pos == 1 })
	for i := range sids {
		sids[i] = a.newSession(t, c.agent, c.envID).ID
		a.send(t, sids[i], jobMessage(sids[i], 0))
	}
	pollUntil(t, 20*time.Second, "every session in a model call", func() bool { return c.model.heldBy(a.id)+c.model.heldBy(b.id) == n })
	owners := c.owners(sids)
	var mine []string
	for _, sid := range sids {
		if owners[sid] == a.id {
			mine = append(mine, sid)
		}
	}
	// Which replica wins a session's wake-up is a race (A's own against
	// B's through NOTIFY), which a loaded machine tilts either way: the
	// drain needs some of them on A.
	if len(mine) == 0 {
		t.Fatalf("leases %v: %s runs none of the %d sessions", owners, a.id, n)
	}
	terminated := time.Now()
	a.signal(t, syscall.SIGTERM)
	pollUntil(t, 10*time.Second, "the drain", func() bool { return strings.Contains(a.out.String(), "draining") })
	c.model.gate.release()
	if err := a.waitExit(t, 20*time.Second); err != nil {
		t.Fatalf("%s exited with %v:\n%s", a.id, err, lastLines(a.out.String(), 30))
	}
	exited := time.Since(terminated)
	pollUntil(t, 20*time.Second, "every turn's end", func() bool {
		for _, sid := range sids {
			if turnsEnded(c.entries(sid)) != 1 {
				return false
			}
		}
		return true
	})
	// B's runners linger with the leases, not yet renewed (a renewal
	// every ttl/3): each expires ttl after B acquired it.
	var lastA, leaseB, firstB, bashB []time.Duration
	for _, sid := range mine {
		l, err := c.store.SessionLease(context.Background(), sid)
		if err != nil || l.Owner != b.id {
			t.Fatalf("session %s: lease %+v, %v", sid, l, err)
		}
		leaseB = append(leaseB, l.Until.Add(-c.ttl).Sub(terminated))
		for _, e := range c.entries(sid) {
			switch e.Event.Type {
			case ma.EventAgentToolUse: // the answer to the call in flight
				lastA = append(lastA, processedAt(t, e.Event).Sub(terminated))
			case ma.EventAgentToolResult: // the next event
				firstB = append(firstB, processedAt(t, e.Event).Sub(terminated))
			}
		}
		_, at := c.bash.runsOf(sid, 1)
		bashB = append(bashB, at.Sub(terminated))
	}
	span := func(ds []time.Duration) string {
		slices.Sort(ds)
		return fmt.Sprintf("%v..%v", ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	t.Logf("SIGTERM of %s with %d sessions in a model call, after it: the call's answer logged %s, the other replica holds the lease %s, runs the bash %s, logs its result %s; the exit %v",
		a.id, len(mine), span(lastA), span(leaseB), span(bashB), span(firstB), exited.Round(time.Millisecond))
	for _, sid := range mine {
		c.checkTurns(sid, 1, false)
		if r := c.redone(sid, 1); len(r) > 0 {
			t.Fatalf("model calls redone: %v", r)
		}
		if got := c.model.step(sid, 1).replicas; got[0] != a.id {
			t.Fatalf("session %s: first model call by %v", sid, got)
		}
		if got := c.model.step(sid, 3).replicas; got[0] != b.id {
			t.Fatalf("session %s: second model call by %v: not handed over", sid, got)
		}
	}
	if worst := firstB[len(firstB)-1]; worst > 5*time.Second {
		t.Fatalf("a session was handed over %v after SIGTERM (a sweep every %v)", worst, c.ttl/2)
	}
}

// TestReplicaProcessesRollingRestart keeps nine sessions in continuous
// turns (each a model call, a bash run and a closing model call, sent to
// the replicas in turn) while each of three replicas is SIGTERMed and
// started again in turn: no turn fails or takes long, no model call is
// made twice, no bash runs twice or is cut off, and the logs are
// gap-free without duplicates.
func TestReplicaProcessesRollingRestart(t *testing.T) {
	c := newProcCluster(t, 3, 5*time.Second)
	c.model.delay = 5 * time.Millisecond
	c.bash.delay = 100 * time.Millisecond
	const n = 9
	sids := make([]string, n)
	for i := range sids {
		sids[i] = c.procs[i%3].newSession(t, c.agent, c.envID).ID
	}
	ended := make([]int, n) // turns ended, by session
	var mu sync.Mutex
	done := func(i int) int {
		mu.Lock()
		defer mu.Unlock()
		return ended[i]
	}
	stop := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	var worst time.Duration
	for i, sid := range sids {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				begin := time.Now()
				if err := c.sendTurn(sid, k, (i+k)%3); err != nil {
					errs <- err
					return
				}
				for {
					entries, err := c.store.ReadLog(context.Background(), sid, 0, 1<<20)
					if err != nil {
						errs <- err
						return
					}
					if turnsEnded(entries) >= k+1 {
						break
					}
					if time.Since(begin) > 20*time.Second {
						errs <- fmt.Errorf("session %s: turn %d did not end within 20s", sid, k)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				mu.Lock()
				ended[i]++
				worst = max(worst, time.Since(begin))
				mu.Unlock()
			}
		})
	}
	progress := func(from []int, what string) {
		t.Helper()
		pollUntil(t, 30*time.Second, what, func() bool {
			for i := range sids {
				if done(i) < from[i]+2 {
					return false
				}
			}
			return true
		})
	}
	progress(make([]int, n), "two turns of every session")
	var exits []time.Duration
	for _, p := range c.procs {
		before := make([]int, n)
		for i := range sids {
			before[i] = done(i)
		}
		terminated := time.Now()
		p.signal(t, syscall.SIGTERM)
		if err := p.waitExit(t, 30*time.Second); err != nil {
			t.Fatalf("%s exited with %v:\n%s", p.id, err, lastLines(p.out.String(), 30))
		}
		exits = append(exits, time.Since(terminated))
		c.start(p)
		progress(before, "two more turns of every session after restarting "+p.id)
	}
	close(stop)
	wg.Wait()
	for range sids {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for i, sid := range sids {
		total += ended[i]
		c.checkTurns(sid, ended[i], false)
		if r := c.redone(sid, ended[i]); len(r) > 0 {
			t.Fatalf("model calls redone: %v", r)
		}
	}
	t.Logf("%d turns across three rolling restarts (exits after %v), the slowest took %v", total, exits, worst)
}

// sendTurn sends turn k's message of a session to replica first, or to
// the next one that takes it. A send whose outcome is unknown (the
// connection failed) is looked for in the log before it is sent again.
func (c *procCluster) sendTurn(sid string, k, first int) error {
	text := fmt.Sprintf("job %s turn %d", sid, k)
	var errs []error
	for try := range 2 * len(c.procs) {
		p := c.procs[(first+try)%len(c.procs)]
		_, err := p.client.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{jobMessage(sid, k)}})
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		entries, err := c.store.ReadLog(context.Background(), sid, 0, 1<<20)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(entries, func(e store.Entry) bool {
			return e.Event.Type == ma.EventUserMessage && len(e.Event.Content) > 0 && e.Event.Content[0].Text == text
		}) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("session %s: turn %d could not be sent: %v", sid, k, errs)
}

// TestReplicaProcessesPauseFenced freezes (SIGSTOP) the replica that runs
// a session mid-turn, past its lease: another replica takes the session
// over and finishes the turn. Resumed (SIGCONT), the frozen replica gets
// the answer of its model call, and the fence refuses what it would
// append: the log has one turn, gap-free, without duplicates, and the
// resumed replica says it lost the session. It then serves as before.
func TestReplicaProcessesPauseFenced(t *testing.T) {
	c := newProcCluster(t, 2, 2*time.Second)
	sid := c.procs[0].newSession(t, c.agent, c.envID).ID
	var victim *replicaProc
	var held atomic.Value // the victim's id, once known
	held.Store("")
	c.model.gate.set(func(replica, _ string, pos int) bool {
		v := held.Load().(string)
		return pos == 1 && (v == "" || replica == v)
	})
	c.procs[0].send(t, sid, jobMessage(sid, 0))
	pollUntil(t, 20*time.Second, "the model call", func() bool { return c.model.heldBy(c.procs[0].id)+c.model.heldBy(c.procs[1].id) == 1 })
	for _, p := range c.procs {
		if c.model.heldBy(p.id) == 1 {
			victim = p
		}
	}
	held.Store(victim.id)
	if owner := c.owners([]string{sid})[sid]; owner != victim.id {
		t.Fatalf("the model call is %s's, the lease %q's", victim.id, owner)
	}
	stopped := time.Now()
	victim.signal(t, syscall.SIGSTOP)
	pollUntil(t, c.ttl+20*time.Second, "the turn's end on the other replica", func() bool { return turnsEnded(c.entries(sid)) == 1 })
	took := time.Since(stopped)
	seq := c.entries(sid)
	// The frozen replica's call gets its answer; then it wakes up.
	c.model.gate.release()
	pollUntil(t, 10*time.Second, "the answer to the frozen replica", func() bool { return c.model.step(sid, 1).answered == 2 })
	victim.signal(t, syscall.SIGCONT)
	fenced := regexp.MustCompile(`session lease taken over|refused by the fence`)
	pollUntil(t, 10*time.Second, "the resumed replica's refusal", func() bool { return fenced.MatchString(victim.out.String()) })
	after := c.entries(sid)
	if len(after) != len(seq) {
		t.Fatalf("%d events appended after the takeover, by the resumed replica", len(after)-len(seq))
	}
	checkLog(t, sid, after)
	for typ, want := range map[string]int{ma.EventAgentToolUse: 1, ma.EventAgentToolResult: 1, ma.EventAgentMessage: 1, ma.EventSessionError: 0} {
		if got := countOf(after, typ); got != want {
			t.Fatalf("%d %s, want %d", got, typ, want)
		}
	}
	if runs, _ := c.bash.runsOf(sid, 1); runs != 1 {
		t.Fatalf("bash ran %d times", runs)
	}
	if got := c.model.step(sid, 1).replicas; len(got) != 2 || got[0] != victim.id || got[1] == victim.id {
		t.Fatalf("first model calls by %v", got)
	}
	t.Logf("%s frozen: the turn finished elsewhere %v later (lease ttl %v); resumed, it logged %q", victim.id, took, c.ttl,
		fenced.FindString(victim.out.String()))
	// Resumed, it serves again.
	victim.send(t, sid, jobMessage(sid, 1))
	pollUntil(t, 20*time.Second, "a second turn", func() bool { return turnsEnded(c.entries(sid)) == 2 })
	checkLog(t, sid, c.entries(sid))
}
