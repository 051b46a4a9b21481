package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/pricing"
	ma "github.com/reinsdev/reins/managedagents"
)

// startPriced starts a server whose price file prices the scripted model
// at $10,000 per million input and output tokens: each of its calls
// costs some cents.
func startPriced(t *testing.T, more ...func(*app.Config)) *server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(`{"models":{"scripted":{"input":10000,"output":10000}},"runtime_per_hour":0.08}`), 0o600); err != nil {
		t.Fatal(err)
	}
	prices, err := pricing.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, options{}, func(c *app.Config) {
		c.Prices = prices
		for _, f := range more {
			f(c)
		}
	})
}

func budgetParam(cents string) anthropic.BetaManagedAgentsBudgetLimitParam {
	return anthropic.BetaManagedAgentsBudgetLimitParam{MaxListCost: anthropic.BetaMonetaryAmountParam{Amount: cents, Currency: "USD"}}
}

// cents reads a usage's list cost.
func cents(t *testing.T, u anthropic.BetaManagedAgentsSessionUsage) int64 {
	t.Helper()
	n, err := strconv.ParseInt(u.ListCost.Amount, 10, 64)
	if err != nil || u.ListCost.Currency != "USD" {
		t.Fatalf("list_cost %s: %v", u.RawJSON(), err)
	}
	return n
}

// TestBudgetStopsAndResumes: a session with a budget of one cent stops
// before its next model request once its list cost reaches it (idle,
// budget_reached, after a session.usage), resumes on its own when the
// budget is raised and when it is removed; each session.usage agrees
// with the session's usage.
func TestBudgetStopsAndResumes(t *testing.T) {
	s := startPriced(t)
	ctx := context.Background()
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)},
		EnvironmentID: env.ID, Budget: budgetParam("1"),
	})
	if err != nil || sess.Budget.MaxListCost.Amount != "1" || sess.Usage.ListCost.Amount != "0" {
		t.Fatalf("create: %+v %v", sess, err)
	}
	st := s.openStream(t, sess.ID)
	defer st.cancel()
	// turn waits for the next idle and checks the session.usage before it
	// against the session's usage.
	turn := func(want string) anthropic.BetaManagedAgentsSessionUsage {
		t.Helper()
		evs := st.until(isIdle)
		idle := evs[len(evs)-1]
		if idle.StopReason == nil || idle.StopReason.Type != want {
			t.Fatalf("stop reason %+v, want %s (%v)", idle.StopReason, want, types(evs))
		}
		if len(evs) < 2 || evs[len(evs)-2].Type != ma.EventSessionUsage {
			t.Fatalf("no session.usage before the idle: %v", types(evs))
		}
		got, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		var snap, cur map[string]any
		json.Unmarshal(evs[len(evs)-2].Usage, &snap)
		json.Unmarshal([]byte(got.Usage.RawJSON()), &cur)
		if sj, cj := string(mustJSON(snap)), string(mustJSON(cur)); sj != cj {
			t.Fatalf("session.usage %s, session usage %s", sj, cj)
		}
		if strings.Contains(got.RawJSON(), "reins_meter") {
			t.Fatalf("the meter is sent: %s", got.RawJSON())
		}
		return got.Usage
	}

	s.send(t, sess.ID, userMessage("one"))
	u := turn(ma.StopEndTurn) // the first call runs: nothing was consumed
	spent := cents(t, u)
	if spent < 1 || u.InputTokens == 0 {
		t.Fatalf("usage after a call: %s", u.RawJSON())
	}
	s.send(t, sess.ID, userMessage("two"))
	u = turn(ma.StopBudgetReached)
	if u.InputTokens != sess.Usage.InputTokens && cents(t, u) != spent {
		t.Fatalf("a call ran past the budget: %s", u.RawJSON())
	}
	got, _ := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if got.Status != "idle" {
		t.Fatalf("status %s", got.Status)
	}

	// Raised above what was consumed: the turn resumes and calls the model.
	if _, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam(strconv.FormatInt(spent+1, 10))}); err != nil {
		t.Fatal(err)
	}
	u = turn(ma.StopEndTurn)
	if c := cents(t, u); c <= spent {
		t.Fatalf("no call after the raise: %d cents, was %d", c, spent)
	}
	spent = cents(t, u)
	s.send(t, sess.ID, userMessage("three"))
	turn(ma.StopBudgetReached)

	// Removed: the turn resumes.
	if _, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{}, option.WithJSONSet("budget", nil)); err != nil {
		t.Fatal(err)
	}
	u = turn(ma.StopEndTurn)
	if c := cents(t, u); c <= spent {
		t.Fatalf("no call after the removal: %d cents, was %d", c, spent)
	}
	evs, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"session.updated"}})
	if err != nil || len(evs.Data) != 2 || !strings.Contains(evs.Data[0].RawJSON(), `"budget":{`) || !strings.Contains(evs.Data[1].RawJSON(), `"budget":null`) {
		t.Fatalf("session.updated events: %+v %v", evs, err)
	}
	// A removed budget cannot be re-added.
	_, err = s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam("100000")})
	apiErrMessage(t, err, "budget_create_only")
}

// apiErrMessage checks a 400 invalid_request_error whose message names
// reason.
func apiErrMessage(t *testing.T, err error, reason string) {
	t.Helper()
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	var ae *anthropic.Error
	errors.As(err, &ae)
	if !strings.Contains(ae.RawJSON(), reason) {
		t.Fatalf("error %s, want %s", ae.RawJSON(), reason)
	}
}

// TestBudgetRules: every budget rule answers 400 invalid_request_error
// naming its reason.
func TestBudgetRules(t *testing.T) {
	s := startPriced(t)
	ctx := context.Background()
	priced := s.newAgent(t, "scripted", toolset(false))
	unpriced := s.newAgent(t, "scripted/other", toolset(false))
	env := s.newEnv(t, "cloud")
	create := func(agentID string, b anthropic.BetaManagedAgentsBudgetLimitParam) (*anthropic.BetaManagedAgentsSession, error) {
		return s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}, EnvironmentID: env.ID, Budget: b})
	}
	_, err := create(unpriced.ID, budgetParam("100"))
	apiErrMessage(t, err, "model_not_budgetable")
	for _, amount := range []string{"25.00", "0", "0100", "-5", ""} {
		_, err = create(priced.ID, budgetParam(amount))
		apiErrMessage(t, err, "budget.max_list_cost.amount")
	}
	_, err = create(priced.ID, anthropic.BetaManagedAgentsBudgetLimitParam{MaxListCost: anthropic.BetaMonetaryAmountParam{Amount: "100", Currency: "EUR"}})
	apiErrMessage(t, err, "budget.max_list_cost.currency")

	plain := s.newSession(t, priced.ID, env.ID)
	_, err = s.client.Beta.Sessions.Update(ctx, plain.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam("100")})
	apiErrMessage(t, err, "budget_create_only")

	capped, err := create(priced.ID, budgetParam("100000"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.Update(ctx, capped.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam("25.00")})
	apiErrMessage(t, err, "budget.max_list_cost.amount")
	st := s.openStream(t, capped.ID)
	defer st.cancel()
	s.send(t, capped.ID, userMessage("spend"))
	waitIdle(t, st)
	got, err := s.client.Beta.Sessions.Get(ctx, capped.ID, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	// Lowered below what was consumed: not raised.
	below := strconv.FormatInt(cents(t, got.Usage)-1, 10)
	_, err = s.client.Beta.Sessions.Update(ctx, capped.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam(below)})
	apiErrMessage(t, err, "budget_not_raised")
}

// TestBudgetPausesChildThread: in a multi-agent session whose
// coordinator's first model call spends past its budget, the child thread
// it starts (a roster agent by spawn_agent, the advisor by
// consult_advisor) makes no model request while the session is at its cap
// (the primary goes idle with budget_reached, the child stays running,
// the cost stays put); once the budget is raised, the child calls its
// model and answers, and the coordinator collects the answer.
func TestBudgetPausesChildThread(t *testing.T) {
	t.Run("spawn_agent", func(t *testing.T) {
		s := startPriced(t)
		coord := s.newCoordinator(t, s.newNamedAgent(t, "worker"))
		budgetPausesChild(t, s, coord, spawnLine("worker", "@text the child's answer"))
	})
	t.Run("consult_advisor", func(t *testing.T) {
		s := startPriced(t)
		lead, err := s.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
			Name: "lead", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
			Multiagent: anthropic.BetaManagedAgentsMultiagentParamsUnion{OfMultiagent20261001: &anthropic.BetaManagedAgentsMultiagent20261001Params{
				Advisor: anthropic.BetaManagedAgentsMultiagentAdvisorParamsUnion{OfEnabled: &anthropic.BetaManagedAgentsMultiagentAdvisorEnabledParams{Model: "scripted"}},
			}}})
		if err != nil {
			t.Fatal(err)
		}
		budgetPausesChild(t, s, lead, `@tool consult_advisor {"question":"@text the child's answer"}`)
	})
}

// budgetPausesChild runs TestBudgetPausesChildThread for a session of
// coord with a budget of one cent, whose first turn starts a child thread
// by the scripted directive start; the child answers "the child's
// answer".
func budgetPausesChild(t *testing.T, s *server, coord *anthropic.BetaManagedAgentsAgent, start string) {
	t.Helper()
	ctx := context.Background()
	sess := s.budgetSession(t, coord.ID, "env", "1")
	st := s.openStream(t, sess.ID)
	defer st.cancel()
	s.send(t, sess.ID, userMessage(start+"\n@then Delegated."))

	// The coordinator's first call spends past the cap and spawns the
	// child; the primary then stops at the cap, and the child starts.
	var got []frame
	var child string
	stopped, started := false, false
	for !stopped || !started {
		f := st.next(10 * time.Second)
		got = append(got, f)
		switch {
		case f.Type == ma.EventThreadCreated:
			child = f.SessionThreadID
		case f.Type == ma.EventThreadStatusRunning && f.SessionThreadID == child:
			started = true
		case isIdle(f):
			if f.StopReason == nil || f.StopReason.Type != ma.StopBudgetReached {
				t.Fatalf("session idle %+v, want budget_reached: %v", f.StopReason, types(got))
			}
			stopped = true
		}
	}
	capped, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	spent := cents(t, capped.Usage)
	if spent < 1 {
		t.Fatalf("the coordinator's call cost nothing: %s", capped.Usage.RawJSON())
	}
	// At the cap the child makes no model request: a scripted call takes
	// milliseconds, so within a second it would have answered.
	deadline := time.After(time.Second)
	for waiting := true; waiting; {
		select {
		case f, ok := <-st.ch:
			if !ok {
				t.Fatalf("stream ended: %v", <-st.errc)
			}
			got = append(got, f)
		case <-deadline:
			waiting = false
		}
	}
	for _, f := range got {
		if f.Type == ma.EventThreadMessageReceived || f.Type == ma.EventThreadStatusIdle {
			t.Fatalf("the child ran at the cap: %v", types(got))
		}
	}
	for _, ev := range s.threadEvents(t, sess.ID, child) {
		if ev.Type == ma.EventSpanModelRequestStart || ev.Type == ma.EventAgentMessage {
			t.Fatalf("the child made a model request at the cap: %s", ev.Type)
		}
	}
	if status := s.threadStatuses(t, sess.ID)[child]; status != "running" {
		t.Fatalf("the paused child is %s, want running", status)
	}
	now, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil || now.Usage.InputTokens != capped.Usage.InputTokens || cents(t, now.Usage) != spent {
		t.Fatalf("the session spent at the cap: %s, was %s (%v)", now.Usage.RawJSON(), capped.Usage.RawJSON(), err)
	}

	// Raised: the child calls its model and answers, the coordinator
	// resumes and collects the answer.
	if _, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam(strconv.FormatInt(spent+100000, 10))}); err != nil {
		t.Fatal(err)
	}
	got = st.untilWithin(isIdle, 20*time.Second)
	if last := got[len(got)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("session idle %+v after the raise, want end_turn: %v", last.StopReason, types(got))
	}
	var reply, final string
	for _, f := range got {
		switch {
		case f.Type == ma.EventThreadMessageReceived && f.FromSessionThreadID == child:
			reply = f.Content[0].Text
		case f.Type == ma.EventAgentMessage && f.SessionThreadID == "":
			final = f.Content[0].Text
		}
	}
	if reply != "the child's answer" || !strings.Contains(final, reply) {
		t.Fatalf("after the raise: the child answered %q, the coordinator %q: %v", reply, final, types(got))
	}
	if status := s.threadStatuses(t, sess.ID)[child]; status != "idle" {
		t.Fatalf("the child is %s after answering, want idle", status)
	}
}

// TestBudgetStopsCoordinatorAtChildCap: a coordinator that answered and
// waits for its child goes idle with budget_reached once the child's
// model call takes the session's cost to its budget (the child pauses
// before its next request, so nothing else would end the wait); the
// session.usage before the idle counts the child's call. Raising the
// budget resumes the child, whose answer the coordinator collects.
func TestBudgetStopsCoordinatorAtChildCap(t *testing.T) {
	s := startPriced(t)
	ctx := context.Background()
	coord := s.newCoordinator(t, s.newNamedAgent(t, "worker", toolset(false)))
	sess := s.budgetSession(t, coord.ID, "env", "100000")
	st := s.openStream(t, sess.ID)
	defer st.cancel()
	// The child's calls take half a second: the coordinator answers
	// meanwhile, and the budget is lowered to just above its spend.
	s.send(t, sess.ID, userMessage(spawnLine("worker", "@sleep 500ms\n@tool bash {\"command\":\"true\"}\n@then the worker's answer")+"\n@then Delegated."))
	answered := false
	got := st.untilWithin(func(f frame) bool {
		answered = answered || f.Type == ma.EventAgentMessage && f.SessionThreadID == ""
		return answered && f.Type == ma.EventSpanModelRequestEnd && f.SessionThreadID == ""
	}, 10*time.Second)
	var child string
	for _, f := range got {
		if f.Type == ma.EventThreadCreated {
			child = f.SessionThreadID
		}
	}
	cur, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	budget := cents(t, cur.Usage) + 1
	if _, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam(strconv.FormatInt(budget, 10))}); err != nil {
		t.Fatal(err)
	}

	got = st.untilWithin(isIdle, 5*time.Second)
	idle := got[len(got)-1]
	if idle.StopReason == nil || idle.StopReason.Type != ma.StopBudgetReached {
		t.Fatalf("session idle %+v, want budget_reached: %v", idle.StopReason, types(got))
	}
	var usage anthropic.BetaManagedAgentsSessionUsage
	if len(got) < 2 || got[len(got)-2].Type != ma.EventSessionUsage || json.Unmarshal(got[len(got)-2].Usage, &usage) != nil {
		t.Fatalf("no session.usage before the idle: %v", types(got))
	}
	if c := cents(t, usage); c < budget {
		t.Fatalf("session.usage %d cents, below the budget %d: the child's call is not counted", c, budget)
	}
	// The child ran its tool and pauses before its second model request.
	until(t, 5*time.Second, "the child's tool result", func() bool {
		return slices.ContainsFunc(s.threadEvents(t, sess.ID, child), func(ev ma.Event) bool { return ev.Type == ma.EventAgentToolResult })
	})
	time.Sleep(300 * time.Millisecond)
	requests := 0
	for _, ev := range s.threadEvents(t, sess.ID, child) {
		if ev.Type == ma.EventSpanModelRequestStart {
			requests++
		}
	}
	if requests != 1 {
		t.Fatalf("the child made %d model requests, want 1 (none at the cap)", requests)
	}

	if _, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam("100000")}); err != nil {
		t.Fatal(err)
	}
	got = st.untilWithin(isIdle, 10*time.Second)
	if last := got[len(got)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("session idle %+v after the raise, want end_turn: %v", last.StopReason, types(got))
	}
	final := ""
	for _, f := range got {
		if f.Type == ma.EventAgentMessage && f.SessionThreadID == "" {
			final = f.Content[0].Text
		}
	}
	if !strings.Contains(final, "the worker's answer") {
		t.Fatalf("the coordinator's answer %q does not collect the child's: %v", final, types(got))
	}
}

// TestDeploymentRunBudget: a deployment's budget is its runs' sessions'
// budget, enforced as a session's own: the run's first turn spends past
// one cent, and the next message stops with budget_reached.
func TestDeploymentRunBudget(t *testing.T) {
	s := startPriced(t)
	ctx := context.Background()
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	p := deploymentParams(a.ID, env.ID, "one", nil)
	p.Budget = budgetParam("1")
	d, err := s.client.Beta.Deployments.New(ctx, p)
	if err != nil || d.Budget.MaxListCost.Amount != "1" {
		t.Fatalf("create: %v %s", err, d.RawJSON())
	}
	run, err := s.client.Beta.Deployments.Run(ctx, d.ID, anthropic.BetaDeploymentRunParams{})
	if err != nil || run.SessionID == "" {
		t.Fatalf("run now: %v %s", err, run.RawJSON())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		sess, err := s.client.Beta.Sessions.Get(ctx, run.SessionID, anthropic.BetaSessionGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if sess.Budget.MaxListCost.Amount != "1" || sess.DeploymentID != d.ID {
			t.Fatalf("the run's session has no budget of the deployment: %s", sess.RawJSON())
		}
		if sess.Status == "idle" && sess.Usage.ListCost.Amount != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's first turn did not end: %s", sess.RawJSON())
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := s.openStream(t, run.SessionID)
	defer st.cancel()
	s.send(t, run.SessionID, userMessage("two"))
	evs := st.until(isIdle)
	if idle := evs[len(evs)-1]; idle.StopReason == nil || idle.StopReason.Type != ma.StopBudgetReached {
		t.Fatalf("stop reason %+v, want budget_reached (%v)", idle.StopReason, types(evs))
	}
}

// TestUsageCountsChildCalls: a child thread's model call is in the
// session's reported usage at once, list cost included, not only from the
// primary thread's next write: while the child runs a tool after its
// call (the coordinator waiting, writing nothing), the session's list
// cost is its tokens' (a cent a token here).
func TestUsageCountsChildCalls(t *testing.T) {
	s := startPriced(t)
	ctx := context.Background()
	coord := s.newCoordinator(t, s.newNamedAgent(t, "worker", toolset(false)))
	sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(coord.ID)},
		EnvironmentID: s.newEnv(t, "env").ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := s.openStream(t, sess.ID)
	defer st.cancel()
	// The child's call ends half a second in, after the coordinator's
	// turn has settled; its bash then runs for three seconds.
	s.send(t, sess.ID, userMessage(spawnLine("worker", "@sleep 500ms\n@tool bash {\"command\":\"sleep 3\"}\n@then the worker's answer")+"\n@then Delegated."))
	child := ""
	for child == "" {
		if f := st.next(10 * time.Second); f.Type == ma.EventThreadCreated {
			child = f.SessionThreadID
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(s.threadEvents(t, sess.ID, child), func(ev ma.Event) bool { return ev.Type == ma.EventAgentToolUse }) {
		if time.Now().After(deadline) {
			t.Fatal("the child never called bash")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if tokens, c := got.Usage.InputTokens+got.Usage.OutputTokens, cents(t, got.Usage); c != tokens {
		t.Fatalf("the session's list cost is %d¢ for %d tokens at a cent each: %s", c, tokens, got.Usage.RawJSON())
	}
	st.until(isIdle)
}

// TestBudgetStopsBeforeGrading: an outcome's grader makes a model request
// like any other, so at the cap the session goes idle with budget_reached
// once the agent's turn ends, before grading (the evaluation stays open),
// and a raised budget grades it.
func TestBudgetStopsBeforeGrading(t *testing.T) {
	s, sess, st, evs := outcomeAtCap(t)
	defer st.cancel()
	ctx := context.Background()
	if g := outcomeFrames(evs); !slices.Contains(g, ma.EventSpanOutcomeEvaluationStart) || slices.ContainsFunc(g, func(typ string) bool {
		return strings.HasPrefix(typ, ma.EventSpanOutcomeEvaluationEnd)
	}) {
		t.Fatalf("want an evaluation started and not graded at the cap: %v", g)
	}
	if evals := outcomeEvaluations(t, s, sess.ID); len(evals) != 1 || evals[0].Result != "evaluating" {
		t.Fatalf("outcome_evaluations at the cap = %+v, want evaluating (paused, not ended)", evals)
	}
	capped, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	raise := strconv.FormatInt(cents(t, capped.Usage)+100000, 10)
	if _, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Budget: budgetParam(raise)}); err != nil {
		t.Fatal(err)
	}
	evs = st.until(isIdle)
	if idle := evs[len(evs)-1]; idle.StopReason == nil || idle.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("stop reason %+v after the raise, want end_turn: %v", idle.StopReason, outcomeFrames(evs))
	}
	if g := outcomeFrames(evs); !slices.Contains(g, ma.EventSpanOutcomeEvaluationEnd+":satisfied") {
		t.Fatalf("the evaluation was not graded after the raise: %v", g)
	}
}

// TestBudgetPausedOutcomeInterrupted: an interrupt sent while a session
// waits at its budget with an outcome under way ends the outcome
// interrupted (its evaluation ended too) and the wait: the session goes
// idle with end_turn and does not resume by itself.
func TestBudgetPausedOutcomeInterrupted(t *testing.T) {
	s, sess, st, _ := outcomeAtCap(t)
	defer st.cancel()
	s.send(t, sess.ID, interruptEvent())
	evs := st.until(isIdle)
	if idle := evs[len(evs)-1]; idle.StopReason == nil || idle.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("stop reason %+v after the interrupt, want end_turn: %v", idle.StopReason, outcomeFrames(evs))
	}
	if g := outcomeFrames(evs); !slices.Contains(g, ma.EventSpanOutcomeEvaluationEnd+":interrupted") {
		t.Fatalf("the evaluation did not end interrupted: %v", g)
	}
	if evals := outcomeEvaluations(t, s, sess.ID); len(evals) != 1 || evals[0].Result != "interrupted" {
		t.Fatalf("outcome_evaluations = %+v, want interrupted", evals)
	}
}

// outcomeAtCap starts a priced server and a session of a scripted agent
// with a budget of one cent, defines an outcome whose agent's first call
// spends past the cap, and returns the session's stream read up to its
// idle with budget_reached (evs).
func outcomeAtCap(t *testing.T) (s *server, sess *anthropic.BetaManagedAgentsSession, st *stream, evs []frame) {
	t.Helper()
	s = startPriced(t, func(c *app.Config) { c.OutcomeHeartbeat = 50 * time.Millisecond })
	sess = s.budgetSession(t, s.newAgent(t, "scripted").ID, "outcomes", "1")
	st = s.openStream(t, sess.ID)
	s.send(t, sess.ID, defineOutcome("@text Here is the summary.", "The summary has a title.\n@grade satisfied It has one.", 0))
	evs = st.until(isIdle)
	if idle := evs[len(evs)-1]; idle.StopReason == nil || idle.StopReason.Type != ma.StopBudgetReached {
		st.cancel()
		t.Fatalf("stop reason %+v, want budget_reached: %v", idle.StopReason, outcomeFrames(evs))
	}
	return s, sess, st, evs
}

// budgetSession creates a session of agentID in a new environment named
// env, with a budget of cents.
func (s *server) budgetSession(t *testing.T, agentID, env, cents string) *anthropic.BetaManagedAgentsSession {
	t.Helper()
	sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)},
		EnvironmentID: s.newEnv(t, env).ID, Budget: budgetParam(cents),
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}
