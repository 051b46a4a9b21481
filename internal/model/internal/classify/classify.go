package classify

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/model"
)

// Failure is a failed model call as the API reported it, either as an HTTP
// error response or as an error event in the middle of a stream.
type Failure struct {
	// Status is the HTTP status of the response; a mid-stream error event
	// arrives on a 200 response.
	Status int
	// Type and Code are the API's error type and code ("overloaded_error",
	// "insufficient_quota", ...), "" when absent.
	Type string
	Code string
	// Message is the API's human-readable message, "" when absent.
	Message string
	// Header holds the response headers (for retry-after), nil if none.
	Header http.Header
}

// Error classifies f into a *model.Error wrapping err.
func (f Failure) Error(err error, now time.Time) *model.Error {
	kind := f.kind()
	me := &model.Error{Kind: kind, Message: f.message(), Err: err}
	if f.Status >= 400 {
		me.StatusCode = f.Status
	}
	if kind == model.KindRateLimited || kind == model.KindOverloaded {
		me.RetryAfter = RetryAfter(f.Header, now)
	}
	return me
}

func (f Failure) kind() model.Kind {
	if f.billing() {
		return model.KindBilling
	}
	switch {
	case f.Status == 529 || f.Type == "overloaded_error":
		return model.KindOverloaded
	case f.Status == http.StatusTooManyRequests || f.Type == "rate_limit_error" || f.Code == "rate_limit_exceeded":
		return model.KindRateLimited
	case f.Status == http.StatusPaymentRequired:
		return model.KindBilling
	case f.Status == http.StatusRequestTimeout || f.Status == http.StatusConflict:
		// Transient conditions that the same request may overcome.
		return model.KindRequestFailed
	case f.Status >= 500:
		return model.KindRequestFailed
	case f.Status >= 400:
		return model.KindInvalid
	}
	// An error event on a successful response: only the type tells.
	switch f.Type {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large":
		return model.KindInvalid
	}
	return model.KindRequestFailed
}

// billing reports whether f says the account cannot pay for the call: no
// credit left, quota used up or a spend limit reached. Providers report this
// under several statuses (402, 400, 429), so it is checked first.
func (f Failure) billing() bool {
	switch f.Type {
	case "billing_error", "insufficient_quota":
		return true
	}
	code := strings.ToLower(f.Code)
	if code == "insufficient_quota" || strings.Contains(code, "spend_limit") || strings.Contains(code, "billing") {
		return true
	}
	msg := strings.ToLower(f.Message)
	for _, s := range []string{"credit balance", "insufficient credit", "insufficient_quota", "exceeded your current quota", "spend limit"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (f Failure) message() string {
	if m := strings.TrimSpace(f.Message); m != "" {
		return m
	}
	if f.Type != "" {
		return f.Type
	}
	if t := http.StatusText(f.Status); t != "" && f.Status >= 400 {
		return strings.ToLower(t)
	}
	return "the model API reported an error"
}

// Transport classifies an error that carries no API response: a connection
// failure, a timeout or a stream cut short. When ctx is done the call was
// abandoned by its caller, which is not a model failure: the result wraps
// ctx.Err() and no *model.Error.
func Transport(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("model call abandoned: %w", cerr)
	}
	return &model.Error{
		Kind:    model.KindRequestFailed,
		Message: "model API request failed: " + err.Error(),
		Err:     err,
	}
}

// BrokenStream returns the error for a response stream that ended before the
// model finished, or ctx's error when the caller abandoned the call.
func BrokenStream(ctx context.Context, what string) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("model call abandoned: %w", cerr)
	}
	return &model.Error{
		Kind:    model.KindRequestFailed,
		Message: "model API stream ended early: " + what,
	}
}

// Stalled returns the error for a call that the idle watchdog cancelled: a
// timeout, which a retry may overcome.
func Stalled(err error) *model.Error {
	return &model.Error{
		Kind:    model.KindRequestFailed,
		Message: "model API request timed out: " + err.Error(),
		Err:     err,
	}
}
