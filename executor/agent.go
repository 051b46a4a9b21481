package executor

import (
	"encoding/json"
	"time"
)

// Methods of the agent end (capability "agent"): an external agent loop
// ("brain") that runs a session's turns.
const (
	MethodTurnStart         = "turn.start"
	MethodTurnCancel        = "turn.cancel"
	MethodSessionEvent      = "session.event"
	MethodModelTokenRefresh = "model_token.refresh"
	MethodToolsTokenRefresh = "tools_token.refresh"
)

// Reasons of the token refreshes (data.reason).
const (
	// ReasonTurnInactive: the turn the refresh names is not running (it
	// ended, was cancelled, or its agent end was replaced).
	ReasonTurnInactive = "turn_inactive"
	// ReasonForbidden: the turn runs on another agent end.
	ReasonForbidden = "forbidden"
	// ReasonModelTokenUnavailable: no model token can be issued now.
	ReasonModelTokenUnavailable = "model_token_unavailable"
	// ReasonToolsTokenUnavailable: no tools token can be issued now.
	ReasonToolsTokenUnavailable = "tools_token_unavailable"
	// ReasonTranscriptUnavailable refuses a turn.start whose transcript
	// is a delta the agent end cannot rebuild (it no longer holds the
	// transcript the delta continues): the hub sends the turn.start again
	// at once, with the whole transcript.
	ReasonTranscriptUnavailable = "transcript_unavailable"
)

// FeatureTranscriptDeltas is the protocol feature "transcript_deltas": an
// agent end that declares it at registration (executor.register's
// features) keeps each session's transcript (the transcript and inputs of
// the session's last turn.start it accepted), so that the next turn.start
// of the session on the same connection may carry only what follows:
// [TurnStart.TranscriptSince] names the last event it keeps, and
// [TurnStart.TranscriptBase] the turn whose turn.start it comes from. An
// agent end that no longer holds them refuses the turn.start with
// {accepted:false, reason:"transcript_unavailable"}. Without the feature
// every turn.start carries the whole transcript.
const FeatureTranscriptDeltas = "transcript_deltas"

// Error codes of a platform tool call's result (an open set, with the
// tool result codes such as workspace_boundary).
const (
	ToolErrorEnvironmentUnavailable = "environment_unavailable"
	ToolErrorPermissionDenied       = "permission_denied"
	ToolErrorApprovalRequired       = "approval_required"
	ToolErrorApprovalInvalid        = "approval_invalid"
	ToolErrorInProgress             = "in_progress"
	ToolErrorIdempotencyKeyReused   = "idempotency_key_reused"
)

// TokenGrant is a short-lived credential the harness gives an agent end:
// a model token (for the model gateway) or a tools token (for the
// platform tools endpoint). A TurnSink or an AgentTurnRequest may give
// BaseURL and URL as paths ("/v1/…"): the hub resolves them against the
// server's base URL as the agent end reached it (its PublicURL option,
// else the host of its connect request).
type TokenGrant struct {
	// Provider and Model are set on a model grant.
	Provider  string    `json:"provider,omitempty"`
	Model     string    `json:"model,omitempty"`
	BaseURL   string    `json:"base_url,omitempty"` // model gateway
	URL       string    `json:"url,omitempty"`      // tools endpoint
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TurnStart is what turn.start carries: everything an agent loop needs to
// run one turn of a session.
type TurnStart struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	// Inputs are the events that started the turn (user messages, tool
	// confirmations, custom tool results), as the API shows them.
	Inputs []json.RawMessage `json:"inputs"`
	// Transcript is the session's log before the inputs, as the API
	// shows it: the conversation so far.
	Transcript []json.RawMessage `json:"transcript,omitempty"`
	// TranscriptSince, set only for an agent end that declared
	// [FeatureTranscriptDeltas], makes Transcript a delta: the whole
	// transcript is the events of the agent end's copy (the transcript
	// and inputs of turn TranscriptBase's turn.start) up to and including
	// the event whose id is TranscriptSince, followed by Transcript. The
	// Go client rebuilds it before the handler runs: a handler never sees
	// these two fields set.
	TranscriptSince string `json:"transcript_since,omitempty"`
	TranscriptBase  string `json:"transcript_base,omitempty"`
	// Agent is the session's agent configuration (model, system prompt,
	// tools), as the API shows it.
	Agent json.RawMessage `json:"agent,omitempty"`
	Model *TokenGrant     `json:"model,omitempty"`
	Tools *TokenGrant     `json:"tools,omitempty"`
}

type TurnStartResult struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
}

type TurnCancelParams struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Reason    string `json:"reason"`
}

type SessionEventParams struct {
	SessionID string            `json:"session_id"`
	TurnID    string            `json:"turn_id"`
	Sequence  int64             `json:"sequence"`
	Events    []json.RawMessage `json:"events"`
}

type SessionEventResult struct {
	NextSequence int64 `json:"next_sequence"`
}

type TokenRefreshParams struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
}
