package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/coder/websocket"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/mcptest"
	ma "github.com/reinsdev/reins/managedagents"
	toolsetpkg "github.com/reinsdev/reins/tools/toolset"
)

// The codes and reasons of the executor protocol's seed that reins
// produces where their situation arises, driven end to end: a real
// server, real WebSockets, executors of the SDK or spoken by hand.

// rawMessage is one JSON-RPC frame.
type rawMessage struct {
	ID     json.RawMessage        `json:"id,omitempty"`
	Method string                 `json:"method,omitempty"`
	Params json.RawMessage        `json:"params,omitempty"`
	Result json.RawMessage        `json:"result,omitempty"`
	Error  *executor.JSONRPCError `json:"error,omitempty"`
}

// rawExecutor speaks reins.executor.v1 by hand over a real WebSocket: it
// sends what the SDKs never would (a result after its lease expired, bad
// frames) and leaves out what they always do (heartbeats).
type rawExecutor struct {
	t        *testing.T
	ws       *websocket.Conn
	requests chan rawMessage // requests and notifications of the harness
	done     chan struct{}   // closed when the connection ended
	readErr  error           // why, after done

	mu      sync.Mutex // guards next and answers
	next    int
	answers map[string]chan rawMessage // by request id
}

// dialRawExecutor connects with an environment key and registers with
// capabilities.
func dialRawExecutor(t *testing.T, url, key, name string, capabilities ...string) *rawExecutor {
	t.Helper()
	x := dialRaw(t, url, key)
	if m := x.register(executor.Subprotocol, name, capabilities...); m.Error != nil {
		t.Fatalf("executor.register: %+v", m.Error)
	}
	return x
}

// dialRaw connects with an environment key, without registering.
func dialRaw(t *testing.T, url, key string) *rawExecutor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := (&executor.TokenEndpoint{URL: url, Credential: key, HTTPClient: ownHTTPClient(t)}).Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.Dial(ctx, tok.URL, &websocket.DialOptions{HTTPClient: ownHTTPClient(t),
		HTTPHeader: http.Header{"Authorization": {"Bearer " + tok.Token}}, Subprotocols: []string{executor.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	x := &rawExecutor{t: t, ws: ws, requests: make(chan rawMessage, 64), done: make(chan struct{}), answers: map[string]chan rawMessage{}}
	go x.readLoop()
	t.Cleanup(func() {
		ws.Close(websocket.StatusNormalClosure, "test over")
		<-x.done
	})
	return x
}

func (x *rawExecutor) register(protocol, name string, capabilities ...string) rawMessage {
	x.t.Helper()
	return x.call("executor.register", map[string]any{"protocol": protocol, "executor": map[string]string{"name": name},
		"capabilities": capabilities, "max_sessions": 1, "sessions": []any{}})
}

func (x *rawExecutor) readLoop() {
	defer close(x.done)
	for {
		_, data, err := x.ws.Read(context.Background())
		if err != nil {
			x.readErr = err
			return
		}
		var m rawMessage
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m.Method != "" {
			x.requests <- m
			continue
		}
		x.mu.Lock()
		ch := x.answers[string(m.ID)]
		x.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// exchange writes a frame as it is and waits for the answer whose id is
// id ("null" for a frame whose id cannot be read).
func (x *rawExecutor) exchange(frame, id string) rawMessage {
	x.t.Helper()
	ch := make(chan rawMessage, 1)
	x.mu.Lock()
	x.answers[id] = ch
	x.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := x.ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		x.t.Fatalf("write: %v", err)
	}
	return within(x.t, ch, "the answer to "+frame[:min(len(frame), 60)])
}

// call sends a request and waits for its answer.
func (x *rawExecutor) call(method string, params any) rawMessage {
	x.t.Helper()
	x.mu.Lock()
	x.next++
	id := string(mustJSON(x.next))
	x.mu.Unlock()
	return x.exchange(string(mustJSON(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})), id)
}

// expect waits for the harness's next request or notification, which
// must be method.
func (x *rawExecutor) expect(method string) rawMessage {
	x.t.Helper()
	m := within(x.t, x.requests, method)
	if m.Method != method {
		x.t.Fatalf("got %s (%s), want %s", m.Method, m.Params, method)
	}
	return m
}

// reply answers a request of the harness.
func (x *rawExecutor) reply(m rawMessage, result any) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := x.ws.Write(ctx, websocket.MessageText, mustJSON(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})); err != nil {
		x.t.Fatalf("write: %v", err)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// wantRPCError checks an answer's error code and message.
func wantRPCError(t *testing.T, what string, m rawMessage, code int) {
	t.Helper()
	if m.Error == nil || m.Error.Code != code || m.Error.Message != executor.CodeMessage(code) {
		t.Fatalf("%s: %+v (result %s), want %d %s", what, m.Error, m.Result, code, executor.CodeMessage(code))
	}
}

// TestExecutorProtocolErrors: reins serve answers bad and out-of-order
// frames with the protocol's codes and keeps the connection usable:
// -32700, -32600, -32000 (before executor.register), -32601, -32602,
// -32006 (a frame over the limit), -32013 (a second registration); an
// unknown protocol is -32010, then close 4003.
func TestExecutorProtocolErrors(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) { c.Hub = executorhub.HubOptions{MaxFrameBytes: 4096} })
	_, key := s.selfHosted(t, "raw frames")
	x := dialRaw(t, s.url, key)
	for _, tc := range []struct {
		frame, id string
		code      int
	}{
		{`{"jsonrpc": "2.0", "id": 1, "method": `, "null", executor.CodeParseError},
		{`{"hello": "world", "id": 2}`, "2", executor.CodeInvalidRequest},
		{`{"jsonrpc": "2.0", "id": 3, "method": "executor.heartbeat", "params": {"sessions": []}}`, "3", executor.CodeUnauthorized},
		{`{"jsonrpc": "2.0", "id": 4, "method": "no.such.method", "params": {}}`, "4", executor.CodeMethodNotFound},
		{`{"jsonrpc": "2.0", "id": 5, "method": "executor.register", "params": {"protocol": 6}}`, "5", executor.CodeInvalidParams},
		{`{"jsonrpc": "2.0", "id": 6, "method": "executor.heartbeat", "params": {"pad": "` + strings.Repeat("x", 8000) + `"}}`, "6", executor.CodePayloadTooLarge},
	} {
		wantRPCError(t, tc.frame[:min(len(tc.frame), 60)], x.exchange(tc.frame, tc.id), tc.code)
	}
	if m := x.register(executor.Subprotocol, "raw", "tool:bash"); m.Error != nil {
		t.Fatalf("register after bad frames: %+v", m.Error)
	}
	wantRPCError(t, "a second executor.register", x.register(executor.Subprotocol, "raw", "tool:bash"), executor.CodeConflict)

	old := dialRaw(t, s.url, key)
	wantRPCError(t, "register with another protocol", old.register("reins.executor.v0", "old"), executor.CodeUnsupportedProtocol)
	within(t, old.done, "the close after -32010")
	if code := executor.CloseCode(old.readErr); code != executor.CloseUnsupportedProtocol {
		t.Fatalf("closed with %d (%v), want 4003", code, old.readErr)
	}
}

// TestExecutorLeaseExpired: an executor that stops heartbeating loses its
// lease: the harness releases the session (session.release, reason
// lease_expired), the model reads that the tool may or may not have run,
// and the executor's late tool.result is answered -32003 lease_expired
// (a session it never held is -32007 session_not_active); its heartbeat
// for the old lease lists the session as lost.
func TestExecutorLeaseExpired(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) {
		c.Hub = executorhub.HubOptions{LeaseTTL: 500 * time.Millisecond, HeartbeatInterval: time.Minute}
	})
	envID, key := s.selfHosted(t, "silent hands")
	x := dialRawExecutor(t, s.url, key, "silent", executor.BuiltinCapabilities()...)
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"echo late"}`+"\n@then done"))

	assign := x.expect("session.assign")
	var lease struct {
		LeaseID string `json:"lease_id"`
	}
	json.Unmarshal(assign.Params, &lease)
	x.reply(assign, map[string]any{"accepted": true})
	tc := x.expect("tool.call")
	var callParams struct {
		ToolCallID string `json:"tool_call_id"`
	}
	json.Unmarshal(tc.Params, &callParams)
	x.reply(tc, map[string]any{"accepted": true})

	release := x.expect("session.release")
	var rel struct{ Reason string }
	json.Unmarshal(release.Params, &rel)
	if rel.Reason != executor.ReleaseLeaseExpired {
		t.Fatalf("session.release %s, want reason lease_expired", release.Params)
	}
	results := resultFrames(st.until(isIdle))
	if len(results) != 1 || !strings.Contains(resultText(results[0]), toolsetpkg.MayHaveRunText) {
		t.Fatalf("tool results after the expiry: %v", describe(results))
	}

	result := func(sessionID string) map[string]any {
		return map[string]any{"session_id": sessionID, "tool_call_id": callParams.ToolCallID,
			"content": []any{map[string]string{"type": "text", "text": "late\n"}}, "is_error": false}
	}
	wantRPCError(t, "tool.result after the lease expired", x.call("tool.result", result(sess.ID)), executor.CodeLeaseExpired)
	wantRPCError(t, "tool.result of a session never held", x.call("tool.result", result("sesn_never_held")), executor.CodeSessionNotActive)
	beat := x.call("executor.heartbeat", map[string]any{"sessions": []any{map[string]string{"session_id": sess.ID, "lease_id": lease.LeaseID}}})
	if beat.Error != nil || !strings.Contains(string(beat.Result), `"reason":"lease_expired"`) {
		t.Fatalf("heartbeat with the expired lease: %s %+v", beat.Result, beat.Error)
	}
	for _, ev := range s.listAll(t, sess.ID) {
		if ev.Type == ma.EventAgentToolResult && strings.Contains(resultText(frame{Event: ev}), "late") {
			t.Fatalf("the late result reached the log: %+v", ev)
		}
	}
}

// TestExecutorBusyToolCallRetried: an executor with one slot for tool
// calls answers a second session's tool.call -32009 executor_busy while
// the first session's call runs; the harness sends the call again after a
// backoff, and it runs once the slot is free instead of failing.
func TestExecutorBusyToolCallRetried(t *testing.T) {
	s := start(t, options{})
	envID, key := s.selfHosted(t, "one slot")
	started := make(chan string, 8)
	startExecutorClientWith(t, s.url, key, "one-slot", func(o *executor.Options) {
		o.MaxSessions, o.MaxConcurrentCalls = 2, 1
		o.OnEvent = func(e executor.Event) {
			if e.Type == executor.EventToolStarted {
				started <- e.SessionID
			}
		}
	})
	a := s.newAgent(t, "scripted", toolset(false))
	first, second := s.newSession(t, a.ID, envID), s.newSession(t, a.ID, envID)
	st1, st2 := s.openStream(t, first.ID), s.openStream(t, second.ID)
	s.send(t, first.ID, userMessage(`@tool bash {"command":"sleep 1.5; echo first"}`+"\n@then done"))
	if id := within(t, started, "the first tool call"); id != first.ID {
		t.Fatalf("tool started for %s, want %s", id, first.ID)
	}
	s.send(t, second.ID, userMessage(`@tool bash {"command":"echo second"}`+"\n@then done"))
	for i, st := range []*stream{st2, st1} {
		results := resultFrames(st.until(isIdle))
		want := []string{"second", "first"}[i]
		if len(results) != 1 || resultText(results[0]) != want || (results[0].IsError != nil && *results[0].IsError) {
			t.Fatalf("results %v, want %q", describe(results), want)
		}
	}
}

// rejectingSessions is a SessionOpener that refuses every session with
// session_rejected, counting the assignments.
type rejectingSessions struct{ assigns atomic.Int32 }

func (r *rejectingSessions) OpenSession(context.Context, executor.Assignment) (executor.Session, error) {
	r.assigns.Add(1)
	return nil, executor.WithReason(executor.CodeInvalidParams, executor.ReasonSessionRejected, "this executor takes no new sessions")
}

// TestAssignSessionRejectedTriesAnotherExecutor: of two executors of an
// environment, the idle one (picked first) rejects the session
// (session.assign answered accepted=false, session_rejected); the
// harness places the session on the other one and its tool runs there.
// With the rejecting executor alone, the model reads the rejection.
func TestAssignSessionRejectedTriesAnotherExecutor(t *testing.T) {
	s := start(t, options{})
	envID, key := s.selfHosted(t, "picky hands")
	startExecutorClientWith(t, s.url, key, "open", func(o *executor.Options) { o.MaxSessions = 4 })
	a := s.newAgent(t, "scripted", toolset(false))
	run := func(sessionID, text string) frame {
		t.Helper()
		st := s.openStream(t, sessionID)
		s.send(t, sessionID, userMessage(`@tool bash {"command":"echo `+text+`"}`+"\n@then done"))
		results := resultFrames(st.until(isIdle))
		if len(results) != 1 {
			t.Fatalf("%d tool results", len(results))
		}
		return results[0]
	}
	// The open executor holds a session: the other one is the least busy.
	if r := run(s.newSession(t, a.ID, envID).ID, "warm"); resultText(r) != "warm" {
		t.Fatalf("warm-up: %q", resultText(r))
	}
	picky := &rejectingSessions{}
	registered := make(chan struct{}, 1)
	startExecutorClientWith(t, s.url, key, "picky", func(o *executor.Options) {
		o.Sessions, o.Capabilities = picky, executor.BuiltinCapabilities()
		o.OnEvent = func(e executor.Event) {
			if e.Type == executor.EventRegistered {
				registered <- struct{}{}
			}
		}
	})
	within(t, registered, "the picky executor's registration")
	if r := run(s.newSession(t, a.ID, envID).ID, "placed"); resultText(r) != "placed" || (r.IsError != nil && *r.IsError) {
		t.Fatalf("after a rejection: %q", resultText(r))
	}
	if picky.assigns.Load() == 0 {
		t.Fatal("the picky executor was never asked: the test proves nothing")
	}

	// Alone, the rejecting executor's reason reaches the model.
	envID, key = s.selfHosted(t, "picky only")
	startExecutorClientWith(t, s.url, key, "picky-only", func(o *executor.Options) {
		o.Sessions, o.Capabilities = &rejectingSessions{}, executor.BuiltinCapabilities()
	})
	r := run(s.newSession(t, a.ID, envID).ID, "never")
	if r.IsError == nil || !*r.IsError || !strings.Contains(resultText(r), executor.ReasonSessionRejected) {
		t.Fatalf("rejected everywhere: %q", resultText(r))
	}
}

// unreachableMCP is an agent end's AcceptTurn that refuses a turn whose
// agent has an MCP server the agent end cannot reach (any HTTP answer
// counts as reachable).
func unreachableMCP(hc *http.Client) func(context.Context, *executor.TurnStart) error {
	return func(ctx context.Context, start *executor.TurnStart) error {
		var agent struct {
			MCPServers []struct{ Name, URL string } `json:"mcp_servers"`
		}
		if err := json.Unmarshal(start.Agent, &agent); err != nil {
			return err
		}
		for _, srv := range agent.MCPServers {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if err != nil {
				return executor.MCPUnavailable(srv.Name, err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return executor.MCPUnavailable(srv.Name, err)
			}
			resp.Body.Close()
		}
		return nil
	}
}

// TestAgentEndMCPUnavailable: an agent end that cannot reach the MCP
// server of the session's agent refuses turn.start with -32008
// mcp_unavailable (reason mcp_connection_failed_error): the session
// records the same session.errors as the built-in loop for an MCP server
// that is down (retrying, then exhausted, naming the server) and goes
// idle with retries_exhausted; the turn never runs on the agent end.
func TestAgentEndMCPUnavailable(t *testing.T) {
	s := start(t, options{})
	down := mcptest.Start(t, mcptest.Options{})
	down.Stop()
	var a struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{"name": "mcp brain", "model": "scripted",
		"mcp_servers": []any{map[string]any{"type": "url", "name": "tools", "url": down.URL()}},
		"tools":       []any{map[string]any{"type": "mcp_toolset", "mcp_server_name": "tools"}},
	}, &a); err != nil {
		t.Fatal(err)
	}
	sessID, token := agentEndSessionWith(t, s, &anthropic.BetaManagedAgentsAgent{ID: a.ID})
	ran := make(chan struct{}, 1)
	hc := ownHTTPClient(t)
	agentEndWith(t, s, token, "mcp-brain", func(ctx context.Context, tr *executor.Turn) error {
		ran <- struct{}{}
		return tr.EndTurn(ctx)
	}, func(o *executor.Options) { o.AcceptTurn = unreachableMCP(hc) })
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("hello"))
	errs := 0 // an unbounded run of session.errors ends the wait too
	got := st.until(func(f frame) bool {
		if f.Type == ma.EventSessionError {
			errs++
		}
		return isIdle(f) || errs > 3
	})
	want := []string{"mcp_connection_failed_error/retrying", "mcp_connection_failed_error/retrying", "mcp_connection_failed_error/exhausted"}
	if e := errorStatuses(got); !slices.Equal(e, want) || got[len(got)-1].StopReason.Type != ma.StopRetriesExhausted {
		t.Fatalf("session errors %v, idle %+v", e, got[len(got)-1].StopReason)
	}
	for _, f := range got {
		if f.Type == ma.EventSessionError && (f.Error.MCPServerName != "tools" || !strings.Contains(f.Error.Message, "mcp_unavailable")) {
			t.Fatalf("session.error %+v: want mcp_server_name tools and the -32008 refusal", f.Error)
		}
	}
	select {
	case <-ran:
		t.Fatal("the refused turn ran on the agent end")
	default:
	}
}
