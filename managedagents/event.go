package managedagents

// Event is a session event. It is one flat struct for all event types; which
// fields are set depends on Type. Persisted events have ID (sevt_…) and
// ProcessedAt (null while a client event waits in the queue).
type Event struct {
	Type        string  `json:"type"`
	ID          string  `json:"id,omitempty"`
	ProcessedAt *string `json:"processed_at"`

	// Content of messages and tool results.
	Content []ContentBlock `json:"content,omitempty"`

	// Tool use events.
	Name                string `json:"name,omitempty"`
	Input               Raw    `json:"input,omitempty"`
	EvaluatedPermission string `json:"evaluated_permission,omitempty"`
	MCPServerName       string `json:"mcp_server_name,omitempty"`
	// Evaluation says which permission policy produced
	// EvaluatedPermission; absent when the call was refused before any
	// policy applied (a tool not enabled), and on events logged before
	// reins wrote it.
	Evaluation *ToolEvaluation `json:"evaluation,omitempty"`

	// Tool results and confirmations.
	ToolUseID       string `json:"tool_use_id,omitempty"`
	CustomToolUseID string `json:"custom_tool_use_id,omitempty"`
	MCPToolUseID    string `json:"mcp_tool_use_id,omitempty"`
	IsError         *bool  `json:"is_error,omitempty"`
	Result          string `json:"result,omitempty"`
	DenyMessage     string `json:"deny_message,omitempty"`

	// SessionThreadID is the child thread an event belongs to (none on
	// the primary thread's events), or the thread a user.interrupt
	// names; see OnSessionStream.
	SessionThreadID string `json:"session_thread_id,omitempty"`

	// Thread events: session.thread_created and session.thread_status_*
	// name the thread's agent; WorkflowRunID (a JSON string or null) and
	// StopDetails (an object or null) are written as null rather than
	// left out where the API has them required (ThreadCreated,
	// ThreadStatus set them so).
	AgentName     string `json:"agent_name,omitempty"`
	WorkflowRunID Raw    `json:"workflow_run_id,omitempty"`
	StopDetails   Raw    `json:"stop_details,omitempty"`

	// agent.thread_message_sent names the receiver, and
	// agent.thread_message_received the sender; the agent name is absent
	// for the primary thread's agent.
	ToSessionThreadID   string `json:"to_session_thread_id,omitempty"`
	ToAgentName         string `json:"to_agent_name,omitempty"`
	FromSessionThreadID string `json:"from_session_thread_id,omitempty"`
	FromAgentName       string `json:"from_agent_name,omitempty"`

	// Status events.
	StopReason *StopReason `json:"stop_reason,omitempty"`
	// Reason says, on session.status_rescheduled, why the session waits
	// (a reins extension).
	Reason string `json:"reason,omitempty"`

	// session.error.
	Error *SessionError `json:"error,omitempty"`

	// Spans.
	ModelRequestStartID string      `json:"model_request_start_id,omitempty"`
	ModelUsage          *ModelUsage `json:"model_usage,omitempty"`

	// user.define_outcome.
	Description   string `json:"description,omitempty"`
	Rubric        Raw    `json:"rubric,omitempty"`
	MaxIterations *int64 `json:"max_iterations,omitempty"`
	OutcomeID     string `json:"outcome_id,omitempty"`

	// span.outcome_evaluation_start, _ongoing and _end (Result holds the
	// verdict of an end).
	Iteration                *int64  `json:"iteration,omitempty"`
	OutcomeEvaluationStartID string  `json:"outcome_evaluation_start_id,omitempty"`
	Explanation              *string `json:"explanation,omitempty"`
	// Usage is an evaluation end's ModelUsage, or a session.usage
	// event's SessionUsage.
	Usage Raw `json:"usage,omitempty"`

	// Budget is a session.usage's (null for none) and a session.updated's
	// that changed it.
	Budget Raw `json:"budget,omitempty"`

	// session.updated.
	Agent    Raw      `json:"agent,omitempty"`
	Metadata Metadata `json:"metadata,omitempty"`
	Title    *string  `json:"title,omitempty"`

	// Flushed marks a queued client event that was discarded, not
	// processed, because the turn ahead of it failed (a reins extension).
	Flushed bool `json:"flushed,omitempty"`

	// CompactedThrough is, on agent.thread_context_compacted, the id of
	// the last event whose content the model no longer sees verbatim; the
	// event's content is the summary that replaces it (a reins extension).
	CompactedThrough string `json:"compacted_through,omitempty"`

	// ServerBlock is, on the agent.tool_use and agent.tool_result of a
	// tool the model's API runs itself (Anthropic's web_search and
	// web_fetch), the API's own content block (server_tool_use,
	// web_search_tool_result, web_fetch_tool_result), kept to be sent back
	// to the model verbatim (a reins extension).
	ServerBlock Raw `json:"server_block,omitempty"`
}

// StopReason says why a session went idle.
type StopReason struct {
	Type     string   `json:"type"`
	EventIDs []string `json:"event_ids,omitempty"`
}

// Stop reason types.
const (
	StopEndTurn          = "end_turn"
	StopRequiresAction   = "requires_action"
	StopRetriesExhausted = "retries_exhausted"
	StopBudgetReached    = "budget_reached"
	// StopRefusal: the model refused; the idle event's stop_details say
	// why (RefusalDetails).
	StopRefusal = "refusal"
)

// RefusalDetails is the stop_details of an idle event whose stop reason
// is refusal: Category and Explanation are null when the model gave none.
type RefusalDetails struct {
	Type        string  `json:"type"` // "refusal"
	Category    *string `json:"category"`
	Explanation *string `json:"explanation"`
}

// SessionError is the error object of a session.error event.
type SessionError struct {
	Type          string      `json:"type"`
	Message       string      `json:"message"`
	RetryStatus   RetryStatus `json:"retry_status"`
	MCPServerName string      `json:"mcp_server_name,omitempty"`
	CredentialID  string      `json:"credential_id,omitempty"`
	VaultID       string      `json:"vault_id,omitempty"`
	// RepositoryURL names the repository of a repository_*_error.
	RepositoryURL string `json:"repository_url,omitempty"`
}

// RetryStatus is {"type":"retrying"|"exhausted"|"terminal"}.
type RetryStatus struct {
	Type string `json:"type"`
}

// Retry statuses.
const (
	RetryRetrying  = "retrying"
	RetryExhausted = "exhausted"
	RetryTerminal  = "terminal"
)

// Session error types (seed 004).
const (
	ErrorUnknown                   = "unknown_error"
	ErrorModelOverloaded           = "model_overloaded_error"
	ErrorModelRateLimited          = "model_rate_limited_error"
	ErrorModelRequestFailed        = "model_request_failed_error"
	ErrorMCPConnectionFailed       = "mcp_connection_failed_error"
	ErrorMCPAuthenticationFailed   = "mcp_authentication_failed_error"
	ErrorBilling                   = "billing_error"
	ErrorCredentialHostUnreachable = "credential_host_unreachable_error"
	// A turn stopped at reins's limit of tool-use rounds, or of
	// compactions in a row without progress (retry status exhausted).
	ErrorToolUseLimitReached    = "tool_use_limit_reached_error"
	ErrorCompactionLimitReached = "compaction_limit_reached_error"
	// A github_repository resource could not be placed; always retrying:
	// the session goes on without the repository (RepositoryURL set).
	ErrorRepositoryAuthentication = "repository_authentication_error"
	ErrorRepositoryForbidden      = "repository_forbidden_error"
	ErrorRepositoryNotFound       = "repository_not_found_error"
	ErrorRepositoryCheckout       = "repository_checkout_error"
	ErrorRepositoryClone          = "repository_clone_error"
)

// ModelUsage is the token usage of one model request.
type ModelUsage struct {
	InputTokens              int64   `json:"input_tokens"`
	OutputTokens             int64   `json:"output_tokens"`
	CacheCreationInputTokens int64   `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64   `json:"cache_read_input_tokens"`
	Speed                    *string `json:"speed"`
}

// BlockRedacted is the type of a redacted block, {"type":"redacted"}: a
// placeholder for content withheld by model policy, in agent.message
// content and, sent back by a client, in user.message content.
const BlockRedacted = "redacted"

// ContentBlock is a content block: text, image, document, search_result
// or redacted.
type ContentBlock struct {
	Type      string         `json:"type"`
	Text      string         `json:"text,omitempty"`
	Source    Raw            `json:"source,omitempty"`
	Title     string         `json:"title,omitempty"`
	Context   string         `json:"context,omitempty"`
	Content   []ContentBlock `json:"content,omitempty"`
	Citations Raw            `json:"citations,omitempty"`
}

// Event types.
const (
	EventUserMessage           = "user.message"
	EventUserInterrupt         = "user.interrupt"
	EventUserToolConfirmation  = "user.tool_confirmation"
	EventUserCustomToolResult  = "user.custom_tool_result"
	EventUserToolResult        = "user.tool_result"
	EventUserDefineOutcome     = "user.define_outcome"
	EventSystemMessage         = "system.message"
	EventAgentMessage          = "agent.message"
	EventAgentThinking         = "agent.thinking"
	EventAgentToolUse          = "agent.tool_use"
	EventAgentToolResult       = "agent.tool_result"
	EventAgentMCPToolUse       = "agent.mcp_tool_use"
	EventAgentMCPToolResult    = "agent.mcp_tool_result"
	EventAgentCustomToolUse    = "agent.custom_tool_use"
	EventAgentContextCompacted = "agent.thread_context_compacted"
	EventStatusRunning         = "session.status_running"
	EventStatusIdle            = "session.status_idle"
	EventStatusRescheduled     = "session.status_rescheduled"
	EventStatusTerminated      = "session.status_terminated"
	EventSessionError          = "session.error"
	EventSessionDeleted        = "session.deleted"
	EventSessionUpdated        = "session.updated"
	EventSessionUsage          = "session.usage"
	EventSpanModelRequestStart = "span.model_request_start"
	EventSpanModelRequestEnd   = "span.model_request_end"

	EventSpanOutcomeEvaluationStart   = "span.outcome_evaluation_start"
	EventSpanOutcomeEvaluationOngoing = "span.outcome_evaluation_ongoing"
	EventSpanOutcomeEvaluationEnd     = "span.outcome_evaluation_end"
)

// Preview is a stream-only event: event_start or event_delta. Previews are
// never persisted.
type Preview struct {
	Type    string        `json:"type"`
	Event   *PreviewEvent `json:"event,omitempty"`
	EventID string        `json:"event_id,omitempty"`
	Delta   *PreviewDelta `json:"delta,omitempty"`
	// Thread is the thread of the event previewed, as StreamThread
	// tells it ("" for the primary thread): the streams that send the
	// preview are the ones whose view holds the event (not sent).
	Thread string `json:"-"`
}

// PreviewEvent names the event an event_start announces.
type PreviewEvent struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// PreviewDelta is the delta of an event_delta.
type PreviewDelta struct {
	Type    string       `json:"type"`
	Index   int          `json:"index"`
	Content ContentBlock `json:"content"`
}
