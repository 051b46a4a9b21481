package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/pricing"
	ma "github.com/reinsdev/reins/managedagents"
)

// startPriced starts a server whose price file prices the scripted model
// at $10,000 per million input and output tokens: each of its calls
// costs some cents.
func startPriced(t *testing.T) *server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(`{"models":{"scripted":{"input":10000,"output":10000}},"runtime_per_hour":0.08}`), 0o600); err != nil {
		t.Fatal(err)
	}
	prices, err := pricing.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, options{}, func(c *app.Config) { c.Prices = prices })
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
