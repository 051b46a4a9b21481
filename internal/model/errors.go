package model

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a failed model call for the harness's retry policy
// (RetryPolicy in package harness): whether the call is tried again and
// which session.error it becomes (the table in docs/models.md).
type Kind int

// The kinds of model failure.
const (
	// KindRequestFailed: 5xx, timeout, connection failure, broken stream.
	// Retryable.
	KindRequestFailed Kind = iota
	// KindOverloaded: HTTP 529 or an overloaded_error. Retryable.
	KindOverloaded
	// KindRateLimited: HTTP 429. Retryable after RetryAfter.
	KindRateLimited
	// KindInvalid: 400/401/403/404 and similar; the same request cannot
	// succeed. Not retryable.
	KindInvalid
	// KindBilling: 402, out of credit, spend limit. Not retryable.
	KindBilling
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindRequestFailed:
		return "request_failed"
	case KindOverloaded:
		return "overloaded"
	case KindRateLimited:
		return "rate_limited"
	case KindInvalid:
		return "invalid"
	case KindBilling:
		return "billing"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Retryable reports whether a retry of the same request may succeed.
func (k Kind) Retryable() bool {
	return k == KindRequestFailed || k == KindOverloaded || k == KindRateLimited
}

// Error is a classified model failure.
type Error struct {
	Kind Kind
	// StatusCode is the HTTP status of the model API, 0 if none.
	StatusCode int
	// Message is a human-readable description safe to show to the user
	// (it never contains credentials).
	Message string
	// RetryAfter is the delay the API asked for (retry-after-ms or
	// retry-after), 0 if none.
	RetryAfter time.Duration
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("model %s (HTTP %d): %s", e.Kind, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("model %s: %s", e.Kind, e.Message)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// AsError returns err as a *Error. An error that is not one is classified as
// KindRequestFailed with err's text as the message.
func AsError(err error) *Error {
	var me *Error
	if errors.As(err, &me) {
		return me
	}
	return &Error{Kind: KindRequestFailed, Message: err.Error(), Err: err}
}
