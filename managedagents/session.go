package managedagents

// Session statuses.
const (
	StatusIdle         = "idle"
	StatusRunning      = "running"
	StatusRescheduling = "rescheduling"
	StatusTerminated   = "terminated"
)

// Session is a running or idle conversation of an agent in an environment.
type Session struct {
	ID                 string              `json:"id"`
	Type               string              `json:"type"`
	Title              string              `json:"title"`
	Status             string              `json:"status"`
	EnvironmentID      string              `json:"environment_id"`
	Agent              SessionAgent        `json:"agent"`
	Resources          []Raw               `json:"resources"`
	Metadata           Metadata            `json:"metadata"`
	VaultIDs           []string            `json:"vault_ids"`
	OutcomeEvaluations []OutcomeEvaluation `json:"outcome_evaluations"`
	Stats              SessionStats        `json:"stats"`
	Usage              SessionUsage        `json:"usage"`
	Budget             *Budget             `json:"budget"`
	CreatedAt          string              `json:"created_at"`
	UpdatedAt          string              `json:"updated_at"`
	ArchivedAt         *string             `json:"archived_at"`
	DeploymentID       *string             `json:"deployment_id"`
	// StopReason is, while the session is idle after a turn, the stop
	// reason of its last session.status_idle (a reins extension: the
	// session object of the API has none, and a client listing sessions
	// would otherwise read each one's events to tell a session waiting on
	// it from a finished one). Absent otherwise.
	StopReason *StopReason `json:"stop_reason,omitempty"`
}

// OutcomeEvaluation is the state of one outcome a user.define_outcome
// defined: an entry of the session's outcome_evaluations.
type OutcomeEvaluation struct {
	Type        string `json:"type"` // "outcome_evaluation"
	OutcomeID   string `json:"outcome_id"`
	Description string `json:"description"`
	// Iteration is the 0-based revision cycle the outcome is on.
	Iteration int64 `json:"iteration"`
	// Result is pending, running, evaluating (not ended) or satisfied,
	// max_iterations_reached, failed, interrupted (ended).
	Result string `json:"result"`
	// Explanation is the latest verdict's explanation (nil before one).
	Explanation *string `json:"explanation"`
	// CompletedAt is when the outcome ended (nil while not ended).
	CompletedAt *string `json:"completed_at"`
}

// Outcome evaluation results.
const (
	OutcomePending              = "pending"
	OutcomeRunning              = "running"
	OutcomeEvaluating           = "evaluating"
	OutcomeSatisfied            = "satisfied"
	OutcomeNeedsRevision        = "needs_revision"
	OutcomeMaxIterationsReached = "max_iterations_reached"
	OutcomeFailed               = "failed"
	OutcomeInterrupted          = "interrupted"
)

// Ended reports whether the outcome reached a terminal result.
func (o OutcomeEvaluation) Ended() bool {
	switch o.Result {
	case OutcomePending, OutcomeRunning, OutcomeEvaluating:
		return false
	}
	return true
}

// SessionStats are a session's timing figures.
type SessionStats struct {
	ActiveSeconds   float64 `json:"active_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// SessionUsage accumulates the token usage of a session's model calls.
type SessionUsage struct {
	InputTokens          int64         `json:"input_tokens"`
	OutputTokens         int64         `json:"output_tokens"`
	CacheReadInputTokens int64         `json:"cache_read_input_tokens"`
	CacheCreation        CacheCreation `json:"cache_creation"`
	// ServerToolUse counts the calls of the tools the model's API ran
	// itself (Anthropic's web_search and web_fetch); nil until one ran.
	ServerToolUse *ServerToolUsage `json:"server_tool_use,omitempty"`
	// ActiveSeconds is the time the session was running, its runtime
	// cost is priced on.
	ActiveSeconds float64 `json:"active_seconds"`
	// ListCost is the session's list cost rounded to the cent; nil while
	// some model it ran has no list price.
	ListCost *MonetaryAmount `json:"list_cost"`
	// Meter is the exact account the list cost is rounded from. It is
	// stored with the session and never sent: [Session.Public] removes
	// it.
	Meter *Meter `json:"reins_meter,omitempty"`
}

// Meter is a session's exact list cost account.
type Meter struct {
	// CallPico is the list cost of the session's model calls and server
	// tools, in picodollars (1e-12 USD).
	CallPico int64 `json:"call_pico"`
	// Unpriced tells that some call ran a model without a list price.
	Unpriced bool `json:"unpriced,omitempty"`
	// ActiveNanos is the session's running time before RunningSince.
	ActiveNanos int64 `json:"active_ns"`
	// RunningSince is when the session's running period began (RFC 3339)
	// while it runs; "" otherwise.
	RunningSince string `json:"running_since,omitempty"`
}

// Public is s as the API answers it: without what reins keeps for itself.
func (s Session) Public() Session {
	s.Usage.Meter = nil
	return s
}

// Budget is a session's spend limit ({"type":"limit"}).
type Budget struct {
	Type        string         `json:"type"`
	MaxListCost MonetaryAmount `json:"max_list_cost"`
}

// BudgetLimit is the Budget type.
const BudgetLimit = "limit"

// MonetaryAmount is an amount of money: an integer count of the
// currency's minor units (cents) as a decimal string.
type MonetaryAmount struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// ServerToolUsage counts server tool calls.
type ServerToolUsage struct {
	WebSearchRequests int64 `json:"web_search_requests"`
	WebFetchRequests  int64 `json:"web_fetch_requests"`
}

// CacheCreation splits cache-creation tokens by lifetime.
type CacheCreation struct {
	Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
}
