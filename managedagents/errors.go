package managedagents

// ErrorBody is the inner object of an error envelope.
type ErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	// Details carries structured context of some errors (the lease state
	// of a failed work heartbeat).
	Details map[string]any `json:"details,omitempty"`
}

// ErrorEnvelope is the body of every error response:
// {"type":"error","error":{"type","message"},"request_id"}.
type ErrorEnvelope struct {
	Type      string    `json:"type"`
	Error     ErrorBody `json:"error"`
	RequestID string    `json:"request_id"`
}

// Error types of the REST envelope.
const (
	ErrInvalidRequest  = "invalid_request_error"
	ErrAuthentication  = "authentication_error"
	ErrPermission      = "permission_error"
	ErrNotFound        = "not_found_error"
	ErrRequestTooLarge = "request_too_large"
	ErrRateLimit       = "rate_limit_error"
	ErrAPI             = "api_error"
	ErrOverloaded      = "overloaded_error"
)
