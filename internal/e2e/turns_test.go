package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	ma "github.com/reinsdev/reins/managedagents"
)

func customTool(name string) anthropic.BetaAgentNewParamsToolUnion {
	return anthropic.BetaAgentNewParamsToolUnion{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
		Name: name, Description: "a test tool",
		InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
	}}
}

func toolset(ask bool) anthropic.BetaAgentNewParamsToolUnion {
	ts := &anthropic.BetaManagedAgentsAgentToolset20260401Params{}
	if ask {
		ts.DefaultConfig.PermissionPolicy.OfAlwaysAsk = &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}
	}
	return anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: ts}
}

// listAll returns the persisted events through the SDK's auto-pager.
func (s *server) listAll(t *testing.T, sessionID string) []ma.Event {
	t.Helper()
	iter := s.client.Beta.Sessions.Events.ListAutoPaging(context.Background(), sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(2)})
	var out []ma.Event
	for iter.Next() {
		var ev ma.Event
		if err := json.Unmarshal([]byte(iter.Current().RawJSON()), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTextTurnAndListMatchesStream(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	sess := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, sess.ID)
	echo := s.send(t, sess.ID, userMessage("hello there"))
	if len(echo) != 1 || echo[0].ID == "" || echo[0].ProcessedAt != nil {
		t.Fatalf("echo %+v: want a queued event with an id and null processed_at", echo)
	}
	got := st.until(isIdle)
	want := []string{"user.message", "session.status_running", "user.message", "span.model_request_start", "agent.message", "span.model_request_end", "session.usage", "session.status_idle"}
	if !slices.Equal(types(got), want) {
		t.Fatalf("stream %v, want %v", types(got), want)
	}
	if got[2].ID != echo[0].ID || got[2].ProcessedAt == nil {
		t.Fatal("the consumed echo must carry the same id and a processed_at")
	}
	if txt := got[4].Content[0].Text; txt != "You said: hello there" {
		t.Fatalf("reply %q", txt)
	}
	if got[7].StopReason == nil || got[7].StopReason.Type != "end_turn" {
		t.Fatalf("idle %+v", got[7].StopReason)
	}
	// Second turn, then compare the list with the stream (dedup by id,
	// keeping the latest echo).
	s.send(t, sess.ID, userMessage("again"))
	got = append(got, st.until(isIdle)...)
	var fromStream []string
	for _, f := range got {
		if i := slices.Index(fromStream, f.ID); i >= 0 {
			fromStream = slices.Delete(fromStream, i, i+1)
		}
		fromStream = append(fromStream, f.ID)
	}
	var listed []string
	for _, ev := range s.listAll(t, sess.ID) {
		listed = append(listed, ev.ID)
	}
	if !slices.Equal(listed, fromStream) {
		t.Fatalf("list %v\nstream %v", listed, fromStream)
	}
	final, _ := s.client.Beta.Sessions.Get(context.Background(), sess.ID, anthropic.BetaSessionGetParams{})
	if final.Status != "idle" || final.Usage.OutputTokens == 0 {
		t.Fatalf("session %s usage %+v", final.Status, final.Usage)
	}
}

func TestCustomToolRoundTrip(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted", customTool("get_weather"))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("@tool get_weather {\"city\":\"Paris\"}\n@then It is sunny in Paris."))
	got := st.until(isIdle)
	use := got[len(got)-4]
	idle := got[len(got)-1]
	if use.Type != "agent.custom_tool_use" || use.Name != "get_weather" || string(use.Input) != `{"city":"Paris"}` {
		t.Fatalf("tool use %+v (stream %v)", use, types(got))
	}
	if idle.StopReason.Type != "requires_action" || !slices.Equal(idle.StopReason.EventIDs, []string{use.ID}) {
		t.Fatalf("idle %+v", idle.StopReason)
	}
	res := s.send(t, sess.ID, anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
		CustomToolUseID: use.ID,
		Content:         []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "sunny, 24C"}}},
	}})
	if res[0].ProcessedAt == nil {
		t.Fatal("a custom tool result is processed on receipt")
	}
	got = st.until(isIdle)
	want := []string{"user.custom_tool_result", "session.status_running", "span.model_request_start", "agent.message", "span.model_request_end", "session.usage", "session.status_idle"}
	if !slices.Equal(types(got), want) {
		t.Fatalf("after result: %v, want %v", types(got), want)
	}
	if got[3].Content[0].Text != "It is sunny in Paris." || got[6].StopReason.Type != "end_turn" {
		t.Fatalf("final %+v %+v", got[3].Content, got[6].StopReason)
	}
	// A second result for the same tool use is refused.
	_, err := s.client.Beta.Sessions.Events.Send(context.Background(), sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{CustomToolUseID: use.ID}}}})
	apiErr(t, err, 400, "invalid_request_error")
}

func TestAlwaysAskAllowAndDeny(t *testing.T) {
	tools := &recordingTools{}
	s := start(t, options{tools: tools})
	a := s.newAgent(t, "scripted", toolset(true))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)

	s.send(t, sess.ID, userMessage("@tool bash {\"command\":\"echo hi\"}\n@then ran it"))
	got := st.until(isIdle)
	use := got[len(got)-4]
	if use.Type != "agent.tool_use" || use.EvaluatedPermission != "ask" || got[len(got)-1].StopReason.Type != "requires_action" {
		t.Fatalf("want an ask tool use and requires_action: %v %+v", types(got), use)
	}
	if tools.count() != 0 {
		t.Fatal("an always_ask tool ran before confirmation")
	}
	s.send(t, sess.ID, anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: use.ID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}})
	got = st.until(isIdle)
	want := []string{"user.tool_confirmation", "session.status_running", "agent.tool_result", "span.model_request_start", "agent.message", "span.model_request_end", "session.usage", "session.status_idle"}
	if !slices.Equal(types(got), want) {
		t.Fatalf("after allow: %v", types(got))
	}
	if tools.count() != 1 || got[2].ToolUseID != use.ID {
		t.Fatalf("tool ran %d times; result for %s", tools.count(), got[2].ToolUseID)
	}

	// Deny: the tool does not run and the model reads the deny message.
	s.send(t, sess.ID, userMessage("@tool bash {\"command\":\"rm -rf /\"}"))
	got = st.until(isIdle)
	use = got[len(got)-4]
	s.send(t, sess.ID, anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: use.ID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultDeny, DenyMessage: anthropic.String("not on my machine")}})
	got = st.until(isIdle)
	if tools.count() != 1 {
		t.Fatal("a denied tool ran")
	}
	msg := got[len(got)-4]
	if msg.Type != "agent.message" || !strings.Contains(msg.Content[0].Text, "not on my machine") {
		t.Fatalf("the model did not read the deny message: %v %+v", types(got), msg)
	}
	// deny_message with allow is refused.
	_, err := s.client.Beta.Sessions.Events.Send(context.Background(), sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: use.ID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow, DenyMessage: anthropic.String("x")}}}})
	apiErr(t, err, 400, "invalid_request_error")
}

func TestInterruptDuringSlowModelCall(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("@sleep 30s\n@text too late"))
	st.until(func(f frame) bool { return f.Type == "span.model_request_start" })
	began := time.Now()
	s.send(t, sess.ID, anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}})
	got := st.until(isIdle)
	if time.Since(began) > 5*time.Second {
		t.Fatalf("interrupt took %s", time.Since(began))
	}
	want := []string{"user.interrupt", "user.interrupt", "span.model_request_end", "session.usage", "session.status_idle"}
	if !slices.Equal(types(got), want) {
		t.Fatalf("after interrupt: %v, want %v", types(got), want)
	}
	if got[2].IsError == nil || !*got[2].IsError || got[4].StopReason.Type != "end_turn" {
		t.Fatalf("span end %+v, idle %+v", got[2], got[4].StopReason)
	}
	// The session takes a new turn normally.
	s.send(t, sess.ID, userMessage("still there?"))
	got = st.until(isIdle)
	if got[len(got)-4].Content[0].Text != "You said: still there?" {
		t.Fatalf("next turn %v", types(got))
	}
}

func TestPreviewsMatchFinalMessage(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID, "agent.message", "agent.thinking")
	s.send(t, sess.ID, userMessage("@think\n@pace 20ms\n@text the quick brown fox jumps"))
	got := st.until(isIdle)
	var startID, thinkingStart, text string
	var final frame
	for _, f := range got {
		switch f.Type {
		case "event_start":
			if f.Started.Type == "agent.message" {
				startID = f.Started.ID
			} else {
				thinkingStart = f.Started.ID
			}
		case "event_delta":
			if f.EventID != startID || f.Delta.Index != 0 {
				t.Fatalf("delta for %s index %d", f.EventID, f.Delta.Index)
			}
			text += f.Delta.Content.Text
		case "agent.message":
			final = f
		case "agent.thinking":
			if f.ID != thinkingStart {
				t.Fatalf("agent.thinking %s, preview %s", f.ID, thinkingStart)
			}
		}
	}
	if startID == "" || final.ID != startID {
		t.Fatalf("preview id %q, final agent.message id %q (%v)", startID, final.ID, types(got))
	}
	if text != final.Content[0].Text {
		t.Fatalf("deltas %q, final %q", text, final.Content[0].Text)
	}
	order := types(got)
	if slices.Index(order, "span.model_request_start") > slices.Index(order, "event_start") || slices.Index(order, "agent.message") > slices.Index(order, "span.model_request_end") {
		t.Fatalf("order %v", order)
	}
	// Previews are never persisted.
	for _, ev := range s.listAll(t, sess.ID) {
		if strings.HasPrefix(ev.Type, "event_") {
			t.Fatalf("preview %s listed", ev.Type)
		}
	}
}
