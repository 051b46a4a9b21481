package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/mcptest"
	ma "github.com/reinsdev/reins/managedagents"
)

// race sends each request at once (released together) and returns how many
// were accepted; every refusal must be a 400 naming the tool use as not
// awaiting.
func (s *server) race(t *testing.T, sessionID string, reqs []anthropic.BetaManagedAgentsEventParamsUnion) (accepted int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	gate := make(chan struct{})
	for _, ev := range reqs {
		wg.Go(func() {
			<-gate
			_, err := s.client.Beta.Sessions.Events.Send(context.Background(), sessionID,
				anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{ev}})
			mu.Lock()
			defer mu.Unlock()
			var ae *anthropic.Error
			switch {
			case err == nil:
				accepted++
			case errors.As(err, &ae) && ae.StatusCode == 400 && strings.Contains(ae.RawJSON(), "is not a"):
			default:
				t.Errorf("send: %v", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	return accepted
}

// countEvents counts the session's live events of a type that answer id.
func (s *server) countEvents(t *testing.T, sessionID, typ, id string) int {
	t.Helper()
	n := 0
	for _, ev := range s.listAll(t, sessionID) {
		if ev.Type == typ && (ev.ToolUseID == id || ev.CustomToolUseID == id) {
			n++
		}
	}
	return n
}

// TestConcurrentCustomToolResults: of 16 results sent at once for one
// custom tool use, exactly one is accepted and logged.
func TestConcurrentCustomToolResults(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted", customTool("get_weather"))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("@tool get_weather {\"city\":\"Paris\"}\n@then sunny"))
	got := st.until(isIdle)
	use := got[len(got)-4]
	if use.Type != ma.EventAgentCustomToolUse {
		t.Fatalf("want a custom tool use: %v", types(got))
	}
	reqs := make([]anthropic.BetaManagedAgentsEventParamsUnion, 16)
	for i := range reqs {
		reqs[i] = anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
			CustomToolUseID: use.ID,
			Content:         []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "sunny"}}},
		}}
	}
	if n := s.race(t, sess.ID, reqs); n != 1 {
		t.Fatalf("%d of 16 results accepted, want 1", n)
	}
	st.until(isIdle)
	if n := s.countEvents(t, sess.ID, ma.EventUserCustomToolResult, use.ID); n != 1 {
		t.Fatalf("%d user.custom_tool_result events in the log, want 1", n)
	}
}

// TestConcurrentAllowAndDeny: an allow and a deny sent at once for one
// always_ask tool use: exactly one is accepted, round after round.
func TestConcurrentAllowAndDeny(t *testing.T) {
	tools := &recordingTools{}
	s := start(t, options{tools: tools})
	a := s.newAgent(t, "scripted", toolset(true))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)
	for round := range 20 {
		s.send(t, sess.ID, userMessage("@tool bash {\"command\":\"echo hi\"}\n@then done"))
		got := st.until(isIdle)
		use := got[len(got)-4]
		if use.Type != ma.EventAgentToolUse || use.EvaluatedPermission != "ask" {
			t.Fatalf("round %d: want an ask tool use: %v", round, types(got))
		}
		conf := func(r anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResult) anthropic.BetaManagedAgentsEventParamsUnion {
			return anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{ToolUseID: use.ID, Result: r}}
		}
		n := s.race(t, sess.ID, []anthropic.BetaManagedAgentsEventParamsUnion{
			conf(anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow),
			conf(anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultDeny)})
		if n != 1 {
			t.Fatalf("round %d: %d of allow+deny accepted, want 1", round, n)
		}
		st.until(isIdle)
		if n := s.countEvents(t, sess.ID, ma.EventUserToolConfirmation, use.ID); n != 1 {
			t.Fatalf("round %d: %d confirmations in the log, want 1", round, n)
		}
	}
}

// TestMCPServersUpdateReachesNextCall: a session's mcp_servers changed
// between turns (while its runner lingers) are what the next tool call
// reaches.
func TestMCPServersUpdateReachesNextCall(t *testing.T) {
	s := start(t, options{})
	first := mcptest.Start(t, mcptest.Options{})
	second := mcptest.Start(t, mcptest.Options{})
	sid := s.mcpSession(t, first, "", "always_allow")
	st := s.openStream(t, sid)

	s.send(t, sid, userMessage(`@tool mcp__tools__echo {"text":"one"}`+"\n@then done"))
	st.until(isIdle)
	if first.Calls.Load() != 1 {
		t.Fatalf("first server calls = %d, want 1", first.Calls.Load())
	}
	if _, err := call(s.url, s.key, "POST", "/v1/sessions/"+sid, map[string]any{"agent": map[string]any{
		"mcp_servers": []any{map[string]any{"type": "url", "name": "tools", "url": second.URL()}}}}, nil); err != nil {
		t.Fatal(err)
	}
	s.send(t, sid, userMessage(`@tool mcp__tools__echo {"text":"two"}`+"\n@then done"))
	got := st.until(isIdle)
	if second.Calls.Load() != 1 || first.Calls.Load() != 1 {
		t.Fatalf("after the update: first server %d calls, second %d; want 1 and 1 (%v)", first.Calls.Load(), second.Calls.Load(), types(got))
	}
}
