package e2e

import (
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	ma "github.com/reinsdev/reins/managedagents"
)

// TestWorkerCredentialsCannotDriveSessions: an environment key sends only
// what a worker reports, the results of the tools it runs; a machine token
// (an executor's credential) does nothing on the HTTP API. Each event that
// drives a session (user.message, user.interrupt, the allow of an
// always_ask call, system.message) and each session write is 403
// permission_error for both, and appends nothing, while the environment
// key's user.tool_result and user.custom_tool_result are accepted.
func TestWorkerCredentialsCannotDriveSessions(t *testing.T) {
	s := start(t, options{})
	envID, envKey := s.selfHosted(t, "pull")
	var machine struct{ Token string }
	if _, err := call(s.url, s.key, "POST", "/v1/machines", map[string]any{"name": "m", "environment_ids": []string{envID}}, &machine); err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted", toolset(true), customTool("lookup"))
	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	// A worker takes the session: its tools run there.
	base := "/v1/environments/" + envID + "/work"
	var item struct{ ID string }
	if _, err := callBearer(s.url, envKey, "GET", base+"/poll", nil, &item); err != nil || item.ID == "" {
		t.Fatalf("poll: %+v %v", item, err)
	}
	if _, err := callBearer(s.url, envKey, "POST", base+"/"+item.ID+"/ack", nil, nil); err != nil {
		t.Fatal(err)
	}

	s.send(t, sess.ID, userMessage(`@tool bash {"command":"true"}`+"\n@then ran it"))
	got := st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "requires_action" })
	use := got[len(got)-4]
	if use.Type != ma.EventAgentToolUse || use.EvaluatedPermission != "ask" {
		t.Fatalf("want an always_ask tool use: %v", types(got))
	}
	credentials := map[string]string{"environment key": envKey, "machine token": machine.Token}
	refused := func(who, method, path string, body any) {
		t.Helper()
		status, err := callBearer(s.url, credentials[who], method, path, body, nil)
		if status != 403 || err == nil || !strings.Contains(err.Error(), `"permission_error"`) {
			t.Errorf("%s: %s %s %v: %d %v, want 403 permission_error", who, method, path, body, status, err)
		}
	}
	text := []map[string]string{{"type": "text", "text": "hi"}}
	events := "/v1/sessions/" + sess.ID + "/events"
	for who := range credentials {
		for _, evs := range [][]map[string]any{
			{{"type": "user.message", "content": text}},
			{{"type": "user.interrupt"}},
			{{"type": "user.tool_confirmation", "tool_use_id": use.ID, "result": "allow"}},
			{{"type": "user.tool_result", "tool_use_id": use.ID, "content": text}, {"type": "system.message", "content": text}},
		} {
			refused(who, "POST", events, map[string]any{"events": evs})
		}
		refused(who, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": envID})
		refused(who, "POST", "/v1/sessions/"+sess.ID, map[string]any{"title": "mine"})
		refused(who, "POST", "/v1/sessions/"+sess.ID+"/archive", nil)
		refused(who, "DELETE", "/v1/sessions/"+sess.ID, nil)
	}
	refused("machine token", "GET", "/v1/sessions/"+sess.ID, nil)
	refused("machine token", "GET", base+"/poll?block_ms=1", nil)
	for _, ev := range s.listAll(t, sess.ID) {
		if ev.Type == ma.EventUserToolConfirmation || ev.Type == ma.EventUserInterrupt || ev.Type == ma.EventSystemMessage ||
			(ev.Type == ma.EventUserMessage && !strings.Contains(ev.Content[0].Text, "@tool")) {
			t.Fatalf("a refused event was appended: %+v", ev)
		}
	}

	// Once the user allows it, the worker reports the tool's result.
	s.send(t, sess.ID, anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: use.ID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}})
	result := map[string]any{"events": []map[string]any{{"type": "user.tool_result", "tool_use_id": use.ID, "content": text}}}
	refused("machine token", "POST", events, result)
	if _, err := callBearer(s.url, envKey, "POST", events, result, nil); err != nil {
		t.Fatalf("the worker's user.tool_result: %v", err)
	}
	st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" })

	// And answers a custom tool it runs.
	s.send(t, sess.ID, userMessage(`@tool lookup {"city":"Paris"}`+"\n@then looked it up"))
	got = st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "requires_action" })
	custom := got[len(got)-4]
	if custom.Type != ma.EventAgentCustomToolUse {
		t.Fatalf("want a custom tool use: %v", types(got))
	}
	answer := map[string]any{"events": []map[string]any{{"type": "user.custom_tool_result", "custom_tool_use_id": custom.ID, "content": text}}}
	refused("machine token", "POST", events, answer)
	if _, err := callBearer(s.url, envKey, "POST", events, answer, nil); err != nil {
		t.Fatalf("the worker's user.custom_tool_result: %v", err)
	}
	st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" })
}
