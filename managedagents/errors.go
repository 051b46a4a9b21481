package managedagents

// ErrorBody is the inner object of an error envelope.
type ErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	// Details carries structured context of some errors (the lease state
	// of a failed work heartbeat).
	Details map[string]any `json:"details,omitempty"`
	// ConflictingMemoryID and ConflictingPath name the memory in the
	// way of a write (memory_path_conflict_error).
	ConflictingMemoryID *string `json:"conflicting_memory_id,omitempty"`
	ConflictingPath     *string `json:"conflicting_path,omitempty"`
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
	// ErrConflict: the request conflicts with the state of another
	// object (a dream that updates the same memory store).
	ErrConflict = "conflict_error"
	// ErrMemoryPathConflict: a memory's path is taken or overlaps
	// another's; ErrMemoryPrecondition: a content_sha256 precondition
	// failed.
	ErrMemoryPathConflict = "memory_path_conflict_error"
	ErrMemoryPrecondition = "memory_precondition_failed_error"
)
