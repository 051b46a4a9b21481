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
	var res executor.PlatformToolResult
	for deadline := time.Now().Add(10 * time.Second); ; {
		res = callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo x >> count.txt; wc -l < count.txt"), IdempotencyKey: "k0"})
		if res.ErrorCode != executor.ToolErrorEnvironmentUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the executor registering
	}
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if slices.ContainsFunc(s.listAll(t, sessID), func(ev ma.Event) bool {
			return ev.Type == ma.EventAgentToolUse && strings.Contains(string(ev.Input), "sleep 2")
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow call's agent.tool_use did not appear")
		}
	}
	status, raw, body := postToolCall(t, tr.Start.Tools.URL, tr.Start.Tools.Token, "slow", `{"name":"bash","input":{"command":"sleep 2; echo slept"}}`)
	if status != 200 || raw.Status != "in_progress" || raw.ErrorCode != executor.ToolErrorInProgress {
		t.Fatalf("the same key while running: %d %s", status, body)
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
// tools_token_unavailable.
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
	if err := tr.EndTurn(context.Background()); err != nil {
		t.Fatal(err)
	}
}
