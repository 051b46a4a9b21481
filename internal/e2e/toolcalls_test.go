package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/turntoken"
	ma "github.com/reinsdev/reins/managedagents"
)

// toolsMasterKey is the master key of the tools endpoint tests' server:
// the tests issue an expired tools token under it.
var toolsMasterKey = []byte("tools-endpoint-master-key-32byte")

// brainSession makes a machine scoped to envID and a session of an agent
// with tools (the agent's tools field, nil for none) whose turns run on an
// agent end; it returns the session id and the machine token.
func brainSession(t *testing.T, s *server, envID string, tools []any) (sessionID, token string) {
	t.Helper()
	var m machineView
	if _, err := call(s.url, s.key, "POST", "/v1/machines", map[string]any{"name": "brain-box", "environment_ids": []string{envID}}, &m); err != nil {
		t.Fatal(err)
	}
	agent := map[string]any{"name": "brain", "model": "scripted"}
	if tools != nil {
		agent["tools"] = tools
	}
	var a struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/agents", agent, &a); err != nil {
		t.Fatal(err)
	}
	var sess struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": envID,
		"metadata": map[string]string{harness.AgentEndMetadataKey: "true"}}, &sess); err != nil {
		t.Fatal(err)
	}
	return sess.ID, m.Token
}

// brainTurns runs an agent end whose turns are handed to the test.
func brainTurns(t *testing.T, s *server, token string) <-chan *executor.Turn {
	t.Helper()
	turns := make(chan *executor.Turn, 4)
	agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		turns <- tr
		return nil
	})
	return turns
}

// toolsAgent: the agent toolset, write on always_ask, glob disabled.
var toolsAgent = []any{map[string]any{"type": "agent_toolset_20260401", "configs": []any{
	map[string]any{"name": "write", "permission_policy": map[string]any{"type": "always_ask"}},
	map[string]any{"name": "glob", "enabled": false},
}}}

func bash(command string) map[string]any { return map[string]any{"command": command} }

// callWhenHandsReady makes the call, again while it answers
// environment_unavailable (the session's executor still registering), for
// up to 20 s.
func callWhenHandsReady(t *testing.T, tr *executor.Turn, call executor.PlatformToolCall) executor.PlatformToolResult {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res := callTool(t, tr, call)
		if res.ErrorCode != executor.ToolErrorEnvironmentUnavailable || time.Now().After(deadline) {
			return res
		}
	}
}

// toolUsesWith returns the session's agent.tool_use events whose input
// holds part.
func toolUsesWith(t *testing.T, s *server, sessID, part string) []ma.Event {
	t.Helper()
	return slices.DeleteFunc(s.listAll(t, sessID), func(ev ma.Event) bool {
		return ev.Type != ma.EventAgentToolUse || !strings.Contains(string(ev.Input), part)
	})
}

// waitToolUse waits up to 10 s for an agent.tool_use whose input holds
// part and returns its id.
func waitToolUse(t *testing.T, s *server, sessID, part string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if uses := toolUsesWith(t, s, sessID, part); len(uses) > 0 {
			return uses[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agent.tool_use with %q appeared", part)
		}
	}
}

// callTool calls the tools endpoint through the SDK's helper and fails
// the test on a request error.
func callTool(t *testing.T, tr *executor.Turn, call executor.PlatformToolCall) executor.PlatformToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := tr.CallTool(ctx, call)
	if err != nil {
		t.Fatalf("%s: %v", call.Name, err)
	}
	return res
}

func toolText(res executor.PlatformToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// wantCode checks a refused call's error_code.
func wantCode(t *testing.T, what string, res executor.PlatformToolResult, code string) {
	t.Helper()
	if res.ErrorCode != code || !res.IsError {
		t.Fatalf("%s: %+v, want is_error with error_code %s", what, res, code)
	}
}

// postToolCall posts a raw platform tool call.
func postToolCall(t *testing.T, url, token, key string, body string) (int, executor.PlatformToolResult, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var res executor.PlatformToolResult
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, res, string(data)
}

// wantRefresh checks a refresh refused with reason.
func wantRefresh(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var re *executor.RPCError
	if !errors.As(err, &re) || re.Reason() != reason {
		t.Fatalf("%s: %v, want reason %s", what, err, reason)
	}
}

// waitIdle waits for the session's next idle and returns its stop reason.
func waitIdle(t *testing.T, st *stream) *ma.StopReason {
	t.Helper()
	evs := st.until(isIdle)
	return evs[len(evs)-1].StopReason
}

func confirm(id, result string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: id, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResult(result)}}
}

// TestPlatformToolsSelfHosted drives the platform tools endpoint of an
// agent-end session of a self-hosted environment through real HTTP: no
// executor (environment_unavailable), then bash on an executor connected
// over WebSocket, recorded as agent.tool_use/agent.tool_result; the
// same key replays without running the tool again (a counter in the
// workspace), another body is idempotency_key_reused, a call still
// running is in_progress; a disabled or unknown tool is
// permission_denied; write on always_ask is approval_required, then
// after the user's confirmation answers its result, and
// approval_invalid / permission_denied for a bad approval and a denial;
// the tools token's refusals (API key, expired, wrong session, turn over)
// and its refresh.
func TestPlatformToolsSelfHosted(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) { c.MasterKey = toolsMasterKey })
	envID, envKey := s.selfHosted(t, "hands")
	sessID, token := brainSession(t, s, envID, toolsAgent)
	turns := brainTurns(t, s, token)
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("work"))
	tr := within(t, turns, "turn.start")
	if tr.Start.Tools == nil || !strings.HasPrefix(tr.Start.Tools.Token, "rtt_") || tr.Start.Tools.URL != s.url+"/v1/sessions/"+sessID+"/tool_calls" {
		t.Fatalf("turn.start tools grant %+v", tr.Start.Tools)
	}
	ctx := context.Background()

	// No executor serves the environment: refused at once.
	began := time.Now()
	wantCode(t, "no hands", callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("true"), IdempotencyKey: "k0"}), executor.ToolErrorEnvironmentUnavailable)
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("environment_unavailable took %v", d)
	}
	startExecutorClient(t, s.url, envKey, "hands-1")
	// The same key runs now: an environment_unavailable outcome is not kept.
	res := callWhenHandsReady(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo x >> count.txt; wc -l < count.txt"), IdempotencyKey: "k0"})
	if res.IsError || strings.TrimSpace(toolText(res)) != "1" || res.ToolCallID == "" || res.Status != "completed" {
		t.Fatalf("bash: %+v", res)
	}
	// Replayed: the first outcome, the tool not run again.
	again := callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo x >> count.txt; wc -l < count.txt"), IdempotencyKey: "k0"})
	if again.ToolCallID != res.ToolCallID || toolText(again) != toolText(res) {
		t.Fatalf("replay: %+v, want %+v", again, res)
	}
	if got := strings.TrimSpace(toolText(callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("wc -l < count.txt")}))); got != "1" {
		t.Fatalf("count.txt has %s lines after a replay, want 1", got)
	}
	wantCode(t, "another body", callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo other"), IdempotencyKey: "k0"}), executor.ToolErrorIdempotencyKeyReused)

	// A call still running: its key answers in_progress.
	slow := make(chan executor.PlatformToolResult, 1)
	go func() {
		r, _ := tr.CallTool(ctx, executor.PlatformToolCall{Name: "bash", Input: bash("sleep 2; echo slept"), IdempotencyKey: "slow"})
		slow <- r
	}()
	waitToolUse(t, s, sessID, "sleep 2")
	status, raw, body := postToolCall(t, tr.Start.Tools.URL, tr.Start.Tools.Token, "slow", `{"name":"bash","input":{"command":"sleep 2; echo slept"}}`)
	if status != 200 || raw.Status != "in_progress" || raw.ErrorCode != executor.ToolErrorInProgress {
		t.Fatalf("the same key while running: %d %s", status, body)
	}
	// The SDK's CallTool with that key waits for the outcome.
	if r := callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("sleep 2; echo slept"), IdempotencyKey: "slow"}); strings.TrimSpace(toolText(r)) != "slept" || r.Status != "completed" {
		t.Fatalf("CallTool on a key in progress: %+v", r)
	}
	if r := within(t, slow, "the slow call"); strings.TrimSpace(toolText(r)) != "slept" {
		t.Fatalf("slow call: %+v", r)
	}

	// Tools the agent does not have.
	wantCode(t, "disabled glob", callTool(t, tr, executor.PlatformToolCall{Name: "glob", Input: map[string]any{"pattern": "*"}}), executor.ToolErrorPermissionDenied)
	wantCode(t, "unknown tool", callTool(t, tr, executor.PlatformToolCall{Name: "rm_rf", Input: map[string]any{}}), executor.ToolErrorPermissionDenied)

	// The tools token: an API key, none, another session, expired, and
	// malformed requests.
	url, tok := tr.Start.Tools.URL, tr.Start.Tools.Token
	for name, c := range map[string]struct {
		url, token, key, body string
		status                int
		want                  string
	}{
		"api key":       {url, s.key, "a", `{"name":"bash"}`, 401, "not an API key"},
		"no token":      {url, "", "a", `{"name":"bash"}`, 401, "an API key is not enough"},
		"other session": {s.url + "/v1/sessions/sesn_other/tool_calls", tok, "a", `{"name":"bash"}`, 403, "is for session " + sessID},
		"no key":        {url, tok, "", `{"name":"bash"}`, 400, "Idempotency-Key"},
		"unknown field": {url, tok, "a", `{"name":"bash","inputs":{}}`, 400, "inputs"},
		"input array":   {url, tok, "a", `{"name":"bash","input":[]}`, 400, "input"},
		"big body":      {url, tok, "a", `{"name":"bash","input":{"command":"` + strings.Repeat("x", 2<<20) + `"}}`, 413, "exceeds"},
	} {
		status, _, body := postToolCall(t, c.url, c.token, c.key, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", name, status, body, c.status, c.want)
		}
	}
	issuer, err := turntoken.New(toolsMasterKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	issuer.Now = func() time.Time { return time.Now().Add(-time.Hour) } // a token issued an hour ago
	expired, _, err := issuer.Issue(turntoken.Tools, sessID, tr.Start.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := postToolCall(t, url, expired, "e", `{"name":"bash","input":{"command":"true"}}`); status != 401 || !strings.Contains(body, "expired") {
		t.Fatalf("expired token: %d %s", status, body)
	}
	// CallTool refreshes a token the endpoint refuses, and goes on.
	tr.Start.Tools = &executor.TokenGrant{URL: url, Token: expired, ExpiresAt: time.Now().Add(time.Hour)}
	if r := callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo refreshed")}); strings.TrimSpace(toolText(r)) != "refreshed" {
		t.Fatalf("after the refresh: %+v", r)
	}
	if tr.Start.Tools.Token == expired || !strings.HasPrefix(tr.Start.Tools.Token, "rtt_") {
		t.Fatalf("the grant was not refreshed: %+v", tr.Start.Tools)
	}

	// write is always_ask: the call records the tool use and asks.
	note := map[string]any{"file_path": "note.txt", "content": "hello"}
	ask := callTool(t, tr, executor.PlatformToolCall{Name: "write", Input: note})
	wantCode(t, "always_ask", ask, executor.ToolErrorApprovalRequired)
	if ask.ToolCallID == "" {
		t.Fatalf("approval_required without the tool use: %+v", ask)
	}
	if err := tr.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	if sr := waitIdle(t, st); sr == nil || sr.Type != ma.StopRequiresAction || !slices.Contains(sr.EventIDs, ask.ToolCallID) {
		t.Fatalf("idle %+v, want requires_action on %s", sr, ask.ToolCallID)
	}
	// The turn is over: its token is refused, and so are its refreshes.
	if _, err := tr.CallTool(ctx, executor.PlatformToolCall{Name: "bash", Input: bash("true")}); err == nil || !strings.Contains(err.Error(), "turn_inactive") {
		t.Fatalf("a call after the turn: %v", err)
	}
	_, err = tr.RefreshToolsToken(ctx)
	wantRefresh(t, "tools_token.refresh after the turn", err, executor.ReasonTurnInactive)
	_, err = tr.RefreshModelToken(ctx)
	wantRefresh(t, "model_token.refresh after the turn", err, executor.ReasonTurnInactive)

	// The user allows: reins runs it, and the next turn's call with the
	// approval answers its result.
	s.send(t, sessID, confirm(ask.ToolCallID, "allow"))
	tr2 := within(t, turns, "the turn after the confirmation")
	if !slices.ContainsFunc(tr2.Start.Inputs, func(raw json.RawMessage) bool { return bytes.Contains(raw, []byte(ma.EventUserToolConfirmation)) }) {
		t.Fatalf("turn inputs %s", tr2.Start.Inputs)
	}
	// The first turn's token, still unexpired, is not the running turn's.
	if _, err := tr.CallTool(ctx, executor.PlatformToolCall{Name: "bash", Input: bash("true")}); err == nil || !strings.Contains(err.Error(), "turn_inactive") {
		t.Fatalf("the ended turn's token during the next turn: %v", err)
	}
	ok := callTool(t, tr2, executor.PlatformToolCall{Name: "write", Input: note, Approval: ask.ToolCallID})
	if ok.IsError || ok.ToolCallID != ask.ToolCallID {
		t.Fatalf("approved write: %+v", ok)
	}
	if got := toolText(callTool(t, tr2, executor.PlatformToolCall{Name: "bash", Input: bash("cat note.txt")})); got != "hello" {
		t.Fatalf("note.txt = %q", got)
	}
	wantCode(t, "unknown approval", callTool(t, tr2, executor.PlatformToolCall{Name: "write", Input: note, Approval: "sevt_nope"}), executor.ToolErrorApprovalInvalid)
	wantCode(t, "approval of another input", callTool(t, tr2, executor.PlatformToolCall{Name: "write", Input: map[string]any{"file_path": "other.txt", "content": "x"}, Approval: ask.ToolCallID}), executor.ToolErrorApprovalInvalid)
	wantCode(t, "approval of a call that did not ask", callTool(t, tr2, executor.PlatformToolCall{Name: "bash", Input: bash("echo x >> count.txt; wc -l < count.txt"), Approval: res.ToolCallID}), executor.ToolErrorApprovalInvalid)

	// The user denies: permission_denied.
	deny := callTool(t, tr2, executor.PlatformToolCall{Name: "write", Input: map[string]any{"file_path": "no.txt", "content": "x"}})
	wantCode(t, "second ask", deny, executor.ToolErrorApprovalRequired)
	if err := tr2.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, st)
	s.send(t, sessID, confirm(deny.ToolCallID, "deny"))
	tr3 := within(t, turns, "the turn after the denial")
	wantCode(t, "denied", callTool(t, tr3, executor.PlatformToolCall{Name: "write", Input: map[string]any{"file_path": "no.txt", "content": "x"}, Approval: deny.ToolCallID}), executor.ToolErrorPermissionDenied)
	if err := tr3.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	if sr := waitIdle(t, st); sr == nil || sr.Type != ma.StopEndTurn {
		t.Fatalf("last idle %+v", sr)
	}

	// The log has each call that ran as the built-in loop records it.
	evs := s.listAll(t, sessID)
	uses := map[string]ma.Event{}
	results := map[string]ma.Event{}
	for _, ev := range evs {
		switch ev.Type {
		case ma.EventAgentToolUse:
			uses[ev.ID] = ev
		case ma.EventAgentToolResult:
			results[ev.ToolUseID] = ev
		}
	}
	if u := uses[res.ToolCallID]; u.Name != "bash" || u.EvaluatedPermission != "allow" || results[res.ToolCallID].ID == "" {
		t.Fatalf("bash tool use %+v, result %+v", u, results[res.ToolCallID])
	}
	if u := uses[ask.ToolCallID]; u.EvaluatedPermission != "ask" || results[ask.ToolCallID].ID == "" {
		t.Fatalf("write tool use %+v, result %+v", u, results[ask.ToolCallID])
	}
	ran := 0
	for _, u := range uses {
		if strings.Contains(string(u.Input), "count.txt; wc") {
			ran++
		}
	}
	if ran != 1 {
		t.Fatalf("the counted bash call is in the log %d times, want 1", ran)
	}
}

// TestPlatformToolsUnavailable: an agent without built-in tools gets no
// tools token: none in turn.start, and tools_token.refresh answers
// tools_token_unavailable; another agent end asking for the turn's tokens
// is forbidden.
func TestPlatformToolsUnavailable(t *testing.T) {
	s := start(t, options{})
	envID, _ := s.selfHosted(t, "brains")
	bare, token := brainSession(t, s, envID, nil)
	turns := brainTurns(t, s, token)
	s.send(t, bare, userMessage("no tools"))
	tr := within(t, turns, "turn.start")
	if tr.Start.Tools != nil {
		t.Fatalf("a tools grant for an agent without tools: %+v", tr.Start.Tools)
	}
	_, err := tr.RefreshToolsToken(context.Background())
	wantRefresh(t, "tools_token.refresh without tools", err, executor.ReasonToolsTokenUnavailable)
	_, err = tr.CallTool(context.Background(), executor.PlatformToolCall{Name: "bash", Input: bash("true")})
	wantRefresh(t, "CallTool without tools", err, executor.ReasonToolsTokenUnavailable)

	// Another agent end asking for this turn's tokens: forbidden.
	other := executor.NewClient(executor.Options{URL: s.url, MachineToken: token, Executor: executor.ExecutorInfo{Name: "other"}, HTTPClient: ownHTTPClient(t),
		Capabilities: []string{executor.CapabilityAgent}, Sessions: &executor.BuiltinSessions{Dir: t.TempDir()},
		Agent: executor.AgentHandlerFunc(func(context.Context, *executor.Turn) error { return nil }), BackoffMin: 10 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); other.Run(context.Background()) }()
	t.Cleanup(func() { other.Stop(); <-done })
	params := map[string]string{"session_id": bare, "turn_id": tr.Start.TurnID}
	for _, m := range []string{executor.MethodToolsTokenRefresh, executor.MethodModelTokenRefresh} {
		for err = executor.ErrNotConnected; errors.Is(err, executor.ErrNotConnected); time.Sleep(10 * time.Millisecond) {
			err = other.Call(context.Background(), m, params, nil)
		}
		wantRefresh(t, m+" from another agent end", err, executor.ReasonForbidden)
	}
	if err := tr.EndTurn(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPlatformToolsReplayAfterRestart: a completed call replays its first
// outcome after a server restart without running again; a call whose
// record lost its outcome (the server stopped after the tool ran) answers
// the result the log has.
func TestPlatformToolsReplayAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s, stop := startStoppable(t, options{dir: dir}, nil)
	envID, envKey := s.selfHosted(t, "hands")
	sessID, token := brainSession(t, s, envID, toolsAgent)
	startExecutorClient(t, s.url, envKey, "hands-1")
	turns := brainTurns(t, s, token)
	s.send(t, sessID, userMessage("count"))
	tr := within(t, turns, "turn.start")
	count := executor.PlatformToolCall{Name: "bash", Input: bash("echo x >> count.txt; wc -l < count.txt"), IdempotencyKey: "count"}
	first := callWhenHandsReady(t, tr, count)
	if strings.TrimSpace(toolText(first)) != "1" {
		t.Fatalf("first call: %+v", first)
	}
	stop()

	s = startWith(t, options{dir: dir}, nil)
	startExecutorClient(t, s.url, envKey, "hands-2")
	turns = brainTurns(t, s, token)
	// The turn cut off by the stop starts again on the new agent end.
	tr = within(t, turns, "turn.start after the restart")
	again := callTool(t, tr, count)
	if again.ToolCallID != first.ToolCallID || toolText(again) != toolText(first) {
		t.Fatalf("replay after the restart: %+v, want %+v", again, first)
	}
	// A record left without its outcome, whose tool use has a result.
	ctx := context.Background()
	rec, _, err := s.app.Store.BeginToolCall(ctx, store.ToolCall{SessionID: sessID, Key: "count"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.app.Store.DeleteToolCall(ctx, sessID, "count"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.app.Store.BeginToolCall(ctx, store.ToolCall{SessionID: sessID, Key: "count", RequestHash: rec.RequestHash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.app.Store.SetToolCallUse(ctx, sessID, "count", rec.ToolUseID); err != nil {
		t.Fatal(err)
	}
	cut := callTool(t, tr, count)
	if cut.Status != "completed" || cut.ToolCallID != first.ToolCallID || toolText(cut) != toolText(first) {
		t.Fatalf("a record without outcome: %+v, want %+v", cut, first)
	}
	// The new executor has a new workspace: the log says what ran.
	if ran := len(toolUsesWith(t, s, sessID, "count.txt; wc")); ran != 1 {
		t.Fatalf("the counted call ran %d times, want 1", ran)
	}
	if err := tr.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPlatformToolsReinsExecutor: bash through the tools endpoint runs on
// a separate `reins executor` process serving the session's self-hosted
// environment, and the SDK lists the call as the built-in loop records
// one (agent.tool_use allowed, then its agent.tool_result).
func TestPlatformToolsReinsExecutor(t *testing.T) {
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, options{})
	envID, envKey := s.selfHosted(t, "hands")
	sessID, token := brainSession(t, s, envID, toolsAgent)
	startExecutor(t, bin, s.url, envKey, "hands-proc")
	turns := brainTurns(t, s, token)
	s.send(t, sessID, userMessage("where are you"))
	tr := within(t, turns, "turn.start")
	res := callWhenHandsReady(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo from-$((40+2)) > out.txt; cat out.txt"), IdempotencyKey: "where"})
	if res.IsError || strings.TrimSpace(toolText(res)) != "from-42" {
		t.Fatalf("bash on reins executor: %+v", res)
	}
	if err := tr.EndTurn(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range s.listAll(t, sessID) {
		switch {
		case ev.Type == ma.EventAgentToolUse && ev.ID == res.ToolCallID && ev.Name == "bash" && ev.EvaluatedPermission == "allow":
			got = append(got, "use")
		case ev.Type == ma.EventAgentToolResult && ev.ToolUseID == res.ToolCallID && len(ev.Content) == 1 && strings.TrimSpace(ev.Content[0].Text) == "from-42":
			got = append(got, "result")
		}
	}
	if !slices.Equal(got, []string{"use", "result"}) {
		t.Fatalf("the log has %v of the call, want its tool use then its result", got)
	}
}

// TestPlatformToolsInterrupt: an interrupt while a call of the tools
// endpoint runs cancels the tool; the call answers, the turn ends, and
// the turn's token is then refused (409 turn_inactive).
func TestPlatformToolsInterrupt(t *testing.T) {
	s := start(t, options{})
	envID, envKey := s.selfHosted(t, "hands")
	sessID, token := brainSession(t, s, envID, toolsAgent)
	startExecutorClient(t, s.url, envKey, "hands-1")
	turns := brainTurns(t, s, token)
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("sleep"))
	tr := within(t, turns, "turn.start")
	callWhenHandsReady(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("true")})
	type outcome struct {
		res executor.PlatformToolResult
		err error
	}
	slow := make(chan outcome, 1)
	go func() {
		r, err := tr.CallTool(context.Background(), executor.PlatformToolCall{Name: "bash", Input: bash("sleep 60")})
		slow <- outcome{r, err}
	}()
	waitToolUse(t, s, sessID, "sleep 60")
	began := time.Now()
	s.send(t, sessID, interruptEvent())
	o := within(t, slow, "the interrupted call's answer")
	if o.err != nil || !o.res.IsError {
		t.Fatalf("interrupted call: %+v %v", o.res, o.err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the interrupted call answered after %v", d)
	}
	if sr := waitIdle(t, st); sr == nil || sr.Type != ma.StopEndTurn {
		t.Fatalf("idle %+v", sr)
	}
	var he *executor.ToolCallHTTPError
	if _, err := tr.CallTool(context.Background(), executor.PlatformToolCall{Name: "bash", Input: bash("true")}); !errors.As(err, &he) || he.StatusCode != http.StatusConflict {
		t.Fatalf("a call after the interrupt: %v, want 409", err)
	}
}

// TestPlatformToolsStopMidCall: the server stops while a call runs; after
// the restart the same key answers what the new runner recorded for the
// cut-off tool use ("may or may not have run"), and the tool is not run
// again.
func TestPlatformToolsStopMidCall(t *testing.T) {
	dir := t.TempDir()
	s, stop := startStoppable(t, options{dir: dir}, nil)
	envID, envKey := s.selfHosted(t, "hands")
	sessID, token := brainSession(t, s, envID, toolsAgent)
	startExecutorClient(t, s.url, envKey, "hands-1")
	turns := brainTurns(t, s, token)
	s.send(t, sessID, userMessage("long"))
	tr := within(t, turns, "turn.start")
	callWhenHandsReady(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("true")})
	long := executor.PlatformToolCall{Name: "bash", Input: bash("echo started; sleep 60"), IdempotencyKey: "long"}
	cut := make(chan error, 1)
	go func() {
		_, err := tr.CallTool(context.Background(), long)
		cut <- err
	}()
	useID := waitToolUse(t, s, sessID, "sleep 60")
	stop()
	if err := within(t, cut, "the cut-off call's answer"); err == nil {
		t.Fatal("the call cut off by the stop answered no error")
	}

	s = startWith(t, options{dir: dir}, nil)
	startExecutorClient(t, s.url, envKey, "hands-2")
	turns = brainTurns(t, s, token)
	tr = within(t, turns, "turn.start after the restart")
	res := callTool(t, tr, long)
	if res.Status != "completed" || res.ToolCallID != useID || !res.IsError {
		t.Fatalf("the cut-off call after the restart: %+v (tool use %s)", res, useID)
	}
	if ran := len(toolUsesWith(t, s, sessID, "sleep 60")); ran != 1 {
		t.Fatalf("the cut-off call is in the log %d times, want 1", ran)
	}
	if err := tr.EndTurn(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPlatformToolsPostgres: on PostgreSQL, a call runs once, replays
// with its key and refuses the key with another body.
func TestPlatformToolsPostgres(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	s := startWith(t, options{}, func(c *app.Config) { c.DatabaseURL = dsn })
	envID, envKey := s.selfHosted(t, "hands")
	sessID, token := brainSession(t, s, envID, toolsAgent)
	startExecutorClient(t, s.url, envKey, "hands-1")
	turns := brainTurns(t, s, token)
	s.send(t, sessID, userMessage("count"))
	tr := within(t, turns, "turn.start")
	count := executor.PlatformToolCall{Name: "bash", Input: bash("echo x >> count.txt; wc -l < count.txt"), IdempotencyKey: "count"}
	first := callWhenHandsReady(t, tr, count)
	if again := callTool(t, tr, count); strings.TrimSpace(toolText(first)) != "1" || again.ToolCallID != first.ToolCallID || toolText(again) != toolText(first) {
		t.Fatalf("first %+v, replay %+v", first, again)
	}
	if got := strings.TrimSpace(toolText(callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("wc -l < count.txt")}))); got != "1" {
		t.Fatalf("count.txt has %s lines, want 1", got)
	}
	wantCode(t, "another body", callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("true"), IdempotencyKey: "count"}), executor.ToolErrorIdempotencyKeyReused)
	if err := tr.EndTurn(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPlatformToolsCloudSession: an agent end serves a session of a cloud
// environment (its machine token scoped to it): the tools endpoint runs
// bash in the session's sandbox, and the log shows the call as the
// built-in loop records it. A machine token is all the agent end holds;
// the machine's executors never get the environment's tool leases.
func TestPlatformToolsCloudSession(t *testing.T) {
	s := start(t, options{})
	cloud := s.newEnv(t, "cloud hands")
	sessID, token := brainSession(t, s, cloud.ID, toolsAgent)
	turns := brainTurns(t, s, token)
	s.send(t, sessID, userMessage("where are you"))
	tr := within(t, turns, "turn.start")
	res := callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo from-$((40+2)); pwd"), IdempotencyKey: "where"})
	if res.IsError || strings.Fields(toolText(res))[0] != "from-42" || strings.Fields(toolText(res))[1] != "/workspace" {
		t.Fatalf("bash in the cloud session's sandbox: %+v", res)
	}
	if err := tr.EndTurn(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range s.listAll(t, sessID) {
		switch {
		case ev.Type == ma.EventAgentToolUse && ev.ID == res.ToolCallID:
			got = append(got, "use")
		case ev.Type == ma.EventAgentToolResult && ev.ToolUseID == res.ToolCallID:
			got = append(got, "result")
		}
	}
	if !slices.Equal(got, []string{"use", "result"}) {
		t.Fatalf("the log has %v of the call, want its tool use then its result", got)
	}

	// An executor of the machine that offers bash gets none of the cloud
	// environment's tool leases: the built-in loop's bash runs in a sandbox.
	var machines struct{ Data []machineView }
	if _, err := call(s.url, s.key, "GET", "/v1/machines", nil, &machines); err != nil || len(machines.Data) != 1 {
		t.Fatalf("machines %+v %v", machines, err)
	}
	machineClient(t, s.url, token, "machine-hands", []string{executor.CapabilityProcess, executor.ToolCapability("bash")})
	waitMachineExecutors(t, s, machines.Data[0].ID, 1, 10*time.Second)
	var a, plain struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{"name": "loop", "model": "scripted", "tools": toolsAgent}, &a); err != nil {
		t.Fatal(err)
	}
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": cloud.ID}, &plain); err != nil {
		t.Fatal(err)
	}
	st := s.openStream(t, plain.ID)
	s.send(t, plain.ID, userMessage(`@tool bash {"command":"pwd"}`+"\n@then done"))
	var where string
	for _, f := range st.until(isIdle) {
		if f.Type == ma.EventAgentToolResult && len(f.Content) > 0 {
			where = strings.TrimSpace(f.Content[0].Text)
		}
	}
	if where != "/workspace" {
		t.Fatalf("the built-in loop's bash ran in %q, want the sandbox's /workspace", where)
	}
}
