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

// newNamedAgent creates a scripted agent with a name and tools.
func (s *server) newNamedAgent(t *testing.T, name string, tools ...anthropic.BetaAgentNewParamsToolUnion) *anthropic.BetaManagedAgentsAgent {
	t.Helper()
	a, err := s.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name: name, Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}, Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newCoordinator creates a scripted coordinator whose roster is the
// agents.
func (s *server) newCoordinator(t *testing.T, roster ...*anthropic.BetaManagedAgentsAgent) *anthropic.BetaManagedAgentsAgent {
	t.Helper()
	var entries []anthropic.BetaManagedAgentsMultiagentRosterEntryParamsUnion
	for _, a := range roster {
		entries = append(entries, anthropic.BetaManagedAgentsMultiagentRosterEntryParamsUnion{OfString: anthropic.String(a.ID)})
	}
	a, err := s.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name: "coordinator", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsUnion{OfCoordinator: &anthropic.BetaManagedAgentsMultiagentCoordinatorParams{Agents: entries}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// coordinatedSession starts a session of a scripted coordinator whose
// roster is a plain scripted agent for each name, with its stream open.
func (s *server) coordinatedSession(t *testing.T, names ...string) (*anthropic.BetaManagedAgentsSession, *stream) {
	t.Helper()
	var roster []*anthropic.BetaManagedAgentsAgent
	for _, n := range names {
		roster = append(roster, s.newNamedAgent(t, n))
	}
	coord := s.newCoordinator(t, roster...)
	sess := s.newSession(t, coord.ID, s.newEnv(t, "env").ID)
	return sess, s.openStream(t, sess.ID)
}

// untilChildrenRun reads st until n child threads run, failing if the
// session goes idle first, and returns the threads' ids by agent name.
func untilChildrenRun(t *testing.T, st *stream, n int) map[string]string {
	t.Helper()
	children := map[string]string{}
	var got []frame
	for running := 0; running < n; {
		f := st.next(10 * time.Second)
		got = append(got, f)
		switch {
		case f.Type == ma.EventThreadCreated:
			children[f.AgentName] = f.SessionThreadID
		case f.Type == ma.EventThreadStatusRunning:
			running++
		case isIdle(f):
			t.Fatalf("the session went idle before its children ran: %v", types(got))
		}
	}
	return children
}

// spawnLine is a scripted directive calling spawn_agent.
func spawnLine(agent, task string) string {
	return `@tool spawn_agent {"agent":"` + agent + `","task":"` + strings.ReplaceAll(strings.ReplaceAll(task, `"`, `\"`), "\n", `\n`) + `"}`
}

// TestThreadsDelegateInParallel: a coordinator with two predefined agents
// spawns both in one model response; each child answers from the
// directives of its task, its answer comes back to the coordinator as a
// thread message, and the coordinator's final answer collects both. The
// session stays running until every thread is idle.
func TestThreadsDelegateInParallel(t *testing.T) {
	s := start(t, options{})
	sess, st := s.coordinatedSession(t, "researcher", "writer")
	s.send(t, sess.ID, userMessage(spawnLine("researcher", "@text A1 from the researcher")+"\n"+
		spawnLine("writer", "@text A2 from the writer")+"\n@then Delegated to two threads."))
	got := st.untilWithin(isIdle, 20*time.Second)
	if last := got[len(got)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("the session went idle with %+v before its threads finished: %v", last.StopReason, types(got))
	}
	var created, sent, received, running, idle []frame
	var final string
	for _, f := range got {
		switch f.Type {
		case ma.EventThreadCreated:
			created = append(created, f)
		case ma.EventThreadMessageSent:
			sent = append(sent, f)
		case ma.EventThreadMessageReceived:
			received = append(received, f)
		case ma.EventThreadStatusRunning:
			running = append(running, f)
		case ma.EventThreadStatusIdle:
			idle = append(idle, f)
		case ma.EventAgentMessage:
			if f.SessionThreadID != "" {
				t.Errorf("a child's agent.message %s is on the session stream", f.ID)
			}
			final = f.Content[0].Text
		}
	}
	if len(created) != 2 || len(sent) != 2 || len(received) != 2 || len(running) != 2 || len(idle) != 2 {
		t.Fatalf("thread events: %d created, %d sent, %d received, %d running, %d idle, want 2 each: %v",
			len(created), len(sent), len(received), len(running), len(idle), types(got))
	}
	children := map[string]string{}
	for _, c := range created {
		children[c.SessionThreadID] = c.AgentName
	}
	if children[created[0].SessionThreadID] == children[created[1].SessionThreadID] || len(children) != 2 {
		t.Fatalf("threads created: %+v", created)
	}
	for _, f := range sent {
		if f.SessionThreadID != "" || children[f.ToSessionThreadID] == "" || f.ToAgentName != children[f.ToSessionThreadID] {
			t.Errorf("agent.thread_message_sent %+v: want the coordinator's, to a child", f.Event)
		}
	}
	for _, f := range append(running, idle...) {
		if children[f.SessionThreadID] == "" || f.AgentName != children[f.SessionThreadID] {
			t.Errorf("%s %+v: want a child's status, cross-posted", f.Type, f.Event)
		}
	}
	answers := map[string]string{"researcher": "A1 from the researcher", "writer": "A2 from the writer"}
	for _, f := range received {
		name := children[f.FromSessionThreadID]
		if f.SessionThreadID != "" || f.FromAgentName != name || len(f.Content) == 0 || f.Content[0].Text != answers[name] {
			t.Errorf("agent.thread_message_received %+v: want %s's answer to the coordinator", f.Event, name)
		}
	}
	if !strings.Contains(final, answers["researcher"]) || !strings.Contains(final, answers["writer"]) {
		t.Fatalf("the coordinator's final answer %q does not collect both answers", final)
	}
	// Every thread is idle, and the primary's events say nothing else.
	for i, f := range got[:len(got)-1] {
		if f.Type == ma.EventStatusIdle {
			t.Fatalf("event %d: the session went idle while a thread ran: %v", i, types(got))
		}
	}
	threads := s.threadStatuses(t, sess.ID)
	if len(threads) != 3 {
		t.Fatalf("threads %v: want the primary and two children", threads)
	}
	for id, status := range threads {
		if status != "idle" {
			t.Errorf("thread %s is %s, want idle", id, status)
		}
	}
}

// untilWithin is until with a deadline for the whole: a session that
// never goes idle fails the test with what it streamed.
func (s *stream) untilWithin(stop func(frame) bool, d time.Duration) []frame {
	s.t.Helper()
	var out []frame
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				s.t.Fatalf("stream ended: %v", <-s.errc)
			}
			out = append(out, ev)
			if stop(ev) {
				return out
			}
		case <-deadline:
			if len(out) > 60 {
				out = append(out[:30], out[len(out)-30:]...)
			}
			s.t.Fatalf("no stop within %s: %v", d, types(out))
		}
	}
}

// threadStatuses lists the session's threads with the SDK: id -> status.
func (s *server) threadStatuses(t *testing.T, sessionID string) map[string]string {
	t.Helper()
	page, err := s.client.Beta.Sessions.Threads.List(context.Background(), sessionID, anthropic.BetaSessionThreadListParams{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, th := range page.Data {
		out[th.ID] = string(th.Status)
	}
	return out
}

// TestThreadsChildConfirmation: a child's always_ask tool use is
// cross-posted to the session, the session goes idle on requires_action
// naming it, and the confirmation the client sends with the tool use's id
// alone reaches the child, which runs the tool and answers.
func TestThreadsChildConfirmation(t *testing.T) {
	s := start(t, options{})
	operator := s.newNamedAgent(t, "operator", toolset(true))
	coord := s.newCoordinator(t, operator)
	env := s.newEnv(t, "env")
	sess := s.newSession(t, coord.ID, env.ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(spawnLine("operator", "@tool bash {\"command\":\"echo confirmed-run\"}\n@then the command ran")+"\n@then Delegated."))
	got := st.untilWithin(isIdle, 20*time.Second)
	last := got[len(got)-1]
	if last.StopReason == nil || last.StopReason.Type != ma.StopRequiresAction || len(last.StopReason.EventIDs) != 1 {
		t.Fatalf("session idle %+v, want requires_action on the child's tool use: %v", last.StopReason, types(got))
	}
	useID := last.StopReason.EventIDs[0]
	i := slices.IndexFunc(got, func(f frame) bool { return f.ID == useID })
	if i < 0 || got[i].Type != ma.EventAgentToolUse || got[i].SessionThreadID == "" || got[i].EvaluatedPermission != "ask" {
		t.Fatalf("the child's tool use %s is not cross-posted with its thread: %v", useID, types(got))
	}
	child := got[i].SessionThreadID
	s.send(t, sess.ID, anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: useID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}})
	got = st.untilWithin(isIdle, 20*time.Second)
	last = got[len(got)-1]
	if last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("session idle %+v after the confirmation, want end_turn: %v", last.StopReason, types(got))
	}
	var reply *frame
	for i := range got {
		if got[i].Type == ma.EventThreadMessageReceived && got[i].FromSessionThreadID == child {
			reply = &got[i]
		}
	}
	if reply == nil || reply.Content[0].Text != "the command ran" {
		t.Fatalf("no answer of the child after its confirmed tool ran: %v", types(got))
	}
	var result *ma.Event
	for _, ev := range s.threadEvents(t, sess.ID, child) {
		if ev.Type == ma.EventAgentToolResult && ev.ToolUseID == useID {
			result = &ev
		}
	}
	if result == nil || (result.IsError != nil && *result.IsError) || !strings.Contains(result.Content[0].Text, "confirmed-run") {
		t.Fatalf("the child's tool result %+v: want the command's output", result)
	}
}

// TestThreadsInterruptAll: an interrupt without session_thread_id stops
// every thread: the children's model calls are cut, each child goes idle
// (end_turn) without answering, and the session goes idle once.
func TestThreadsInterruptAll(t *testing.T) {
	s := start(t, options{})
	sess, st := s.coordinatedSession(t, "slow-one", "slow-two")
	s.send(t, sess.ID, userMessage(spawnLine("slow-one", "@sleep 60s\n@text too late")+"\n"+
		spawnLine("slow-two", "@sleep 60s\n@text too late")+"\n@then Delegated."))
	untilChildrenRun(t, st, 2)
	time.Sleep(200 * time.Millisecond) // the children's model calls are under way
	start := time.Now()
	s.send(t, sess.ID, interruptEvent())
	got := st.untilWithin(isIdle, 20*time.Second)
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the interrupt took %s", time.Since(start))
	}
	last := got[len(got)-1]
	if last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("session idle %+v, want end_turn", last.StopReason)
	}
	stopped := map[string]bool{}
	for _, f := range got {
		switch f.Type {
		case ma.EventThreadStatusIdle:
			if f.StopReason == nil || f.StopReason.Type != ma.StopEndTurn {
				t.Errorf("thread %s idle with %+v, want end_turn", f.SessionThreadID, f.StopReason)
			}
			stopped[f.SessionThreadID] = true
		case ma.EventThreadMessageReceived:
			t.Errorf("an interrupted thread answered: %+v", f.Event)
		}
	}
	if len(stopped) != 2 {
		t.Fatalf("%d threads went idle, want 2: %v", len(stopped), types(got))
	}
	for id, status := range s.threadStatuses(t, sess.ID) {
		if status != "idle" {
			t.Errorf("thread %s is %s after the interrupt, want idle", id, status)
		}
	}
	select {
	case f := <-st.ch:
		t.Fatalf("an event after the session went idle: %s %+v", f.Type, f.Event)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestThreadsInterruptOne: an interrupt naming one of two working children
// ends that child's turn alone: the other's model call is not cut (one
// model request, its answer delivered), and the coordinator, answered by
// the one child, ends the session's turn.
func TestThreadsInterruptOne(t *testing.T) {
	s := start(t, options{})
	sess, st := s.coordinatedSession(t, "steady", "slow")
	s.send(t, sess.ID, userMessage(spawnLine("steady", "@sleep 2s\n@text steady done")+"\n"+
		spawnLine("slow", "@sleep 60s\n@text too late")+"\n@then Delegated."))
	children := untilChildrenRun(t, st, 2)
	time.Sleep(200 * time.Millisecond) // both children's model calls are under way
	s.send(t, sess.ID, anthropic.BetaManagedAgentsEventParamsUnion{
		OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{SessionThreadID: anthropic.String(children["slow"])}})
	got := st.untilWithin(isIdle, 20*time.Second)
	if last := got[len(got)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("session idle %+v, want end_turn", last.StopReason)
	}
	answered := map[string]string{}
	for _, f := range got {
		if f.Type == ma.EventThreadMessageReceived && len(f.Content) > 0 {
			answered[f.FromSessionThreadID] = f.Content[0].Text
		}
	}
	if answered[children["steady"]] != "steady done" || answered[children["slow"]] != "" {
		t.Fatalf("answers %v: want steady's alone (threads %v)", answered, children)
	}
	starts, cut := 0, 0
	for _, ev := range s.threadEvents(t, sess.ID, children["steady"]) {
		switch {
		case ev.Type == ma.EventSpanModelRequestStart:
			starts++
		case ev.Type == ma.EventSpanModelRequestEnd && ev.IsError != nil && *ev.IsError:
			cut++
		}
	}
	if starts != 1 || cut != 0 {
		t.Fatalf("the steady child made %d model requests, %d cut short: the interrupt of another thread reached it", starts, cut)
	}
	for id, status := range s.threadStatuses(t, sess.ID) {
		if status != "idle" {
			t.Errorf("thread %s is %s, want idle", id, status)
		}
	}
}

// TestThreadsAdvisorInlineAndFollowUp: list_agents describes the roster,
// the advisor and the threads; consult_advisor starts an advisor thread
// (agent {type: advisor}) whose answer comes back, and a second question
// continues that thread; spawn_agent starts an inline agent, and
// message_thread gives the idle child a second turn whose answer comes
// back too.
func TestThreadsAdvisorInlineAndFollowUp(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	lead, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "lead", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsUnion{OfMultiagent20261001: &anthropic.BetaManagedAgentsMultiagent20261001Params{
			Advisor: anthropic.BetaManagedAgentsMultiagentAdvisorParamsUnion{OfEnabled: &anthropic.BetaManagedAgentsMultiagentAdvisorEnabledParams{Model: "scripted"}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.newSession(t, lead.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool list_agents {}`+"\n"+
		`@tool consult_advisor {"question":"@text use the blue one"}`+"\n"+
		`@tool spawn_agent {"agent":{"name":"helper","system":"you help"},"task":"@text H1 done"}`+"\n@then Asked."))
	got := st.untilWithin(isIdle, 20*time.Second)
	if last := got[len(got)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("idle with %+v: %v", last.StopReason, types(got))
	}
	results := map[string]string{} // tool name -> result text
	uses := map[string]string{}    // tool use id -> name
	final := ""
	for _, f := range got {
		switch f.Type {
		case ma.EventAgentToolUse:
			uses[f.ID] = f.Name
		case ma.EventAgentToolResult:
			if f.IsError != nil && *f.IsError {
				t.Errorf("%s failed: %+v", uses[f.ToolUseID], f.Content)
			}
			results[uses[f.ToolUseID]] = f.Content[0].Text
		case ma.EventAgentMessage:
			final = f.Content[0].Text
		}
	}
	var list struct {
		Agents       []any   `json:"agents"`
		InlineAgents bool    `json:"inline_agents"`
		Advisor      *string `json:"advisor_model"`
		Threads      []any   `json:"threads"`
		ThreadsLeft  int     `json:"threads_left"`
	}
	if err := json.Unmarshal([]byte(results["list_agents"]), &list); err != nil || len(list.Agents) != 0 || !list.InlineAgents ||
		list.Advisor == nil || *list.Advisor != "scripted" || len(list.Threads) != 0 || list.ThreadsLeft != 24 {
		t.Fatalf("list_agents: %s (%v)", results["list_agents"], err)
	}
	var spawned, advised struct {
		ThreadID  string `json:"thread_id"`
		AgentName string `json:"agent_name"`
		Status    string `json:"status"`
	}
	if err := json.Unmarshal([]byte(results["spawn_agent"]), &spawned); err != nil || spawned.AgentName != "helper" || spawned.Status != "running" {
		t.Fatalf("spawn_agent: %s", results["spawn_agent"])
	}
	if err := json.Unmarshal([]byte(results["consult_advisor"]), &advised); err != nil || advised.AgentName != "advisor" {
		t.Fatalf("consult_advisor: %s", results["consult_advisor"])
	}
	if !strings.Contains(final, "use the blue one") || !strings.Contains(final, "H1 done") {
		t.Fatalf("final answer %q does not collect the advisor's and the helper's", final)
	}
	adv, err := s.client.Beta.Sessions.Threads.Get(ctx, advised.ThreadID, anthropic.BetaSessionThreadGetParams{SessionID: sess.ID})
	if err != nil || !strings.Contains(adv.Agent.RawJSON(), `"type":"advisor"`) || !strings.Contains(adv.Agent.RawJSON(), `"scripted"`) {
		t.Fatalf("advisor thread: %v %s", err, adv.Agent.RawJSON())
	}

	s.send(t, sess.ID, userMessage(`@tool message_thread {"thread_id":"`+spawned.ThreadID+`","content":"@text H2 done"}`+"\n"+
		`@tool consult_advisor {"question":"@text second advice"}`+"\n@then Asked again."))
	got = st.untilWithin(isIdle, 20*time.Second)
	final = ""
	for _, f := range got {
		if f.Type == ma.EventAgentMessage {
			final = f.Content[0].Text
		}
		if f.Type == ma.EventThreadCreated {
			t.Errorf("a second question or message created a thread: %+v", f.Event)
		}
	}
	if !strings.Contains(final, "second advice") || !strings.Contains(final, "H2 done") {
		t.Fatalf("final answer %q does not collect the follow-up answers: %v", final, types(got))
	}
	if n := len(s.threadStatuses(t, sess.ID)); n != 3 {
		t.Fatalf("%d threads, want the primary, the advisor and the helper", n)
	}
}
