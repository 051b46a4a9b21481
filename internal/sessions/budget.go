package sessions

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/agents"
	"github.com/reinsdev/reins/internal/pricing"
	ma "github.com/reinsdev/reins/managedagents"
)

// amountPattern is a monetary amount: an integer count of cents, without
// leading zeros.
var amountPattern = regexp.MustCompile(`^[1-9][0-9]{0,15}$`)

// ParseBudget decodes and checks the budget of a request: nil for null or
// absent.
func ParseBudget(raw []byte) (*ma.Budget, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b ma.Budget
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, rejected("budget: %v", err)
	}
	if b.Type == "" {
		b.Type = ma.BudgetLimit
	}
	return &b, CheckBudget(&b)
}

// CheckBudget checks a budget's type and amount: a positive integer count
// of US cents as a decimal string without leading zeros.
func CheckBudget(b *ma.Budget) error {
	if b == nil {
		return nil
	}
	if b.Type != ma.BudgetLimit {
		return rejected("budget.type: must be %q, got %q", ma.BudgetLimit, b.Type)
	}
	if !amountPattern.MatchString(b.MaxListCost.Amount) {
		return rejected("budget.max_list_cost.amount: must be an integer count of cents greater than 0, as a decimal string without leading zeros (\"2500\" is $25.00); got %q", b.MaxListCost.Amount)
	}
	if b.MaxListCost.Currency != "USD" {
		return rejected("budget.max_list_cost.currency: only \"USD\" is supported; got %q", b.MaxListCost.Currency)
	}
	return nil
}

// BudgetCents is a checked budget's cap in cents.
func BudgetCents(b *ma.Budget) int64 {
	n, _ := strconv.ParseInt(b.MaxListCost.Amount, 10, 64)
	return n
}

// checkBudgetable refuses a budget on a session one of whose models has
// no list price: its agent's, its threads' and advisor's, the grader's.
func checkBudgetable(prices *pricing.Table, a ma.SessionAgent, grader string) error {
	models := []string{a.Model.ID}
	if grader != "" {
		models = append(models, grader)
	}
	m, err := agents.SessionMultiagent(a)
	if err != nil {
		return err
	}
	if id, ok := m.AdvisorModel(); ok {
		models = append(models, id)
	}
	for _, e := range m.Delegates() {
		if e.Definition != nil {
			models = append(models, e.Definition.Model.ID)
		}
	}
	for _, id := range models {
		if !prices.Priced(id) {
			return rejected("budget: model_not_budgetable: the model %s has no list price on this server (see docs/usage.md to configure one)", id)
		}
	}
	return nil
}

// changeBudget applies a session update's budget (nil removes it) to cur
// by the rules: a budget is set at creation only, and one that stays must
// be above the list cost already consumed.
func (s *Service) changeBudget(cur *ma.Session, next *ma.Budget, now time.Time) error {
	if err := CheckBudget(next); err != nil {
		return err
	}
	if cur.Status == ma.StatusTerminated {
		return conflict("budget: session %s is terminated", cur.ID)
	}
	if next == nil {
		cur.Budget = nil
		return nil
	}
	if cur.Budget == nil {
		return rejected("budget: budget_create_only: a budget is set when the session is created; one cannot be added to a session without one, nor re-added once removed")
	}
	if !Within(s.cfg.Prices, &cur.Usage, next, now) {
		return rejected("budget: budget_not_raised: the budget must be above the list cost the session has consumed")
	}
	cur.Budget = next
	return nil
}

// Consumed is the exact list cost of a session's usage at now, in
// picodollars; ok is false when some model it ran has no list price.
func Consumed(prices *pricing.Table, u *ma.SessionUsage, now time.Time) (pico *big.Rat, ok bool) {
	m := u.Meter
	if m == nil {
		return prices.Total(0, 0), true
	}
	return prices.Total(m.CallPico, Active(m, now)), !m.Unpriced
}

// Active is a meter's running time at now.
func Active(m *ma.Meter, now time.Time) time.Duration {
	d := time.Duration(m.ActiveNanos)
	if t, err := time.Parse(time.RFC3339Nano, m.RunningSince); err == nil && now.After(t) {
		d += now.Sub(t)
	}
	return d
}

// Within reports whether a session's list cost at now is below budget b
// (always, without one): the harness's check before a model request.
func Within(prices *pricing.Table, u *ma.SessionUsage, b *ma.Budget, now time.Time) bool {
	if b == nil {
		return true
	}
	cost, ok := Consumed(prices, u, now)
	return ok && cost.Cmp(pricing.CentsAmount(BudgetCents(b))) < 0
}

// FillUsage sets the reported figures of a session's usage (active
// seconds, list cost rounded to the cent) from its meter at now.
func FillUsage(prices *pricing.Table, u *ma.SessionUsage, now time.Time) {
	m := u.Meter
	if m == nil {
		m = &ma.Meter{}
	}
	u.ActiveSeconds = Active(m, now).Seconds()
	cost, ok := Consumed(prices, u, now)
	if !ok || prices == nil {
		u.ListCost = nil
		return
	}
	u.ListCost = &ma.MonetaryAmount{Amount: strconv.FormatInt(pricing.Cents(cost), 10), Currency: "USD"}
}
