package mcp

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// A Code is the stable, machine-readable reason of a [Failure]. The set of
// codes is closed: it is exactly the constants declared in this package.
type Code string

// The operation failure codes.
const (
	// CodeUnavailable: the operation is unknown to this caller or denied by
	// policy (the two are indistinguishable), or the binding serving it is
	// shutting down or could not start it.
	CodeUnavailable Code = "unavailable"
	// CodeInvalidArguments: the arguments fail the input schema, exceed the
	// argument budget, fall outside the numeric profile, or cannot be
	// expressed by the operation.
	CodeInvalidArguments Code = "invalid_arguments"
	// CodeBusy: a confirmation transition is already in progress for the
	// chain, the continuation ledger is full, or every execution slot is
	// taken. Retryable.
	CodeBusy Code = "busy"
	// CodeTimeout: the caller's deadline or the execution timeout passed.
	CodeTimeout Code = "timeout"
	// CodeCancelled: the caller cancelled, or the host shut down mid-run.
	CodeCancelled Code = "cancelled"
	// CodeConfirmationRequired: the handler asked for form or URL input and
	// the caller declared no support for that mode.
	CodeConfirmationRequired Code = "confirmation_required"
	// CodeInteractionDeclined: the user declined a prompt.
	CodeInteractionDeclined Code = "interaction_declined"
	// CodeInteractionCancelled: the user cancelled a prompt.
	CodeInteractionCancelled Code = "interaction_cancelled"
	// CodeInteractionLimit: a chain asked for more prompts than allowed.
	CodeInteractionLimit Code = "interaction_limit"
	// CodeContinuationInvalid: a continuation token is malformed, forged,
	// for another operation or caller, or its answer conflicts with the
	// recorded one.
	CodeContinuationInvalid Code = "continuation_invalid"
	// CodeContinuationStale: a continuation token from a previous server
	// lifetime or for an expired prompt.
	CodeContinuationStale Code = "continuation_stale"
	// CodeInvalidResult: a handler returned no outcome, an unconstructed
	// result, output failing its schema or an unapproved view; or a
	// definition the registry could not compile.
	CodeInvalidResult Code = "invalid_result"
	// CodeResultTooLarge: a result exceeds the result budget or the wire
	// ceiling.
	CodeResultTooLarge Code = "result_too_large"
	// CodeCommandFailed: a child command exited non-zero.
	CodeCommandFailed Code = "command_failed"
	// CodeCleanupFailed: a child or descendant could not be confirmed
	// stopped within the cleanup budget, or Shutdown ran out of budget.
	CodeCleanupFailed Code = "cleanup_failed"
	// CodeReadFailed: a resource read failed. Retryable.
	CodeReadFailed Code = "read_failed"
	// CodeInternal: anything that could not be classified.
	CodeInternal Code = "internal"
)

var knownCodes = map[Code]bool{
	CodeUnavailable: true, CodeInvalidArguments: true, CodeBusy: true,
	CodeTimeout: true, CodeCancelled: true, CodeConfirmationRequired: true,
	CodeInteractionDeclined: true, CodeInteractionCancelled: true,
	CodeInteractionLimit: true, CodeContinuationInvalid: true,
	CodeContinuationStale: true, CodeInvalidResult: true,
	CodeResultTooLarge: true, CodeCommandFailed: true, CodeCleanupFailed: true,
	CodeReadFailed: true, CodeInternal: true,
}

// Valid reports whether c is one of the declared codes.
func (c Code) Valid() bool { return knownCodes[c] }

// Retryable reports whether a caller may retry the same request after a
// failure with this code: true only for [CodeBusy] and [CodeReadFailed].
func (c Code) Retryable() bool { return c == CodeBusy || c == CodeReadFailed }

// maxMessageLen bounds a caller-safe message.
const maxMessageLen = 1024

// internalMessage is the caller-safe message of every internal failure.
const internalMessage = "internal error"

// A Failure is the outcome of an operation that did not succeed. Its Code
// and Message reach the caller; its cause stays on the server and is only
// logged.
type Failure struct {
	code    Code
	message string
	cause   error
	// Details, when non-nil, is merged into the failure's structured
	// content as diagnostics (for example a command's stdout and stderr).
	details map[string]any
}

// NewFailure returns a failure with the given code, caller-safe message and
// private cause (which may be nil). A code outside the declared set, or an
// empty, over-long or non-UTF-8 message, yields an [CodeInternal] failure
// whose cause records the mistake.
func NewFailure(code Code, message string, cause error) *Failure {
	switch {
	case !code.Valid():
		return &Failure{code: CodeInternal, message: internalMessage,
			cause: fmt.Errorf("mcp: NewFailure with invalid code %q: %w", code, errOrNil(cause))}
	case message == "" || len(message) > maxMessageLen || !utf8.ValidString(message):
		return &Failure{code: CodeInternal, message: internalMessage,
			cause: fmt.Errorf("mcp: NewFailure(%s) with invalid message: %w", code, errOrNil(cause))}
	}
	return &Failure{code: code, message: message, cause: cause}
}

// errOrNil keeps %w happy for a nil cause.
func errOrNil(err error) error {
	if err == nil {
		return errNoCause
	}
	return err
}

var errNoCause = errors.New("no cause")

// Code returns the failure's stable code.
func (f *Failure) Code() Code { return f.code }

// Message returns the caller-safe message.
func (f *Failure) Message() string { return f.message }

// Retryable reports whether the caller may retry; see [Code.Retryable].
func (f *Failure) Retryable() bool { return f.code.Retryable() }

// Error implements error. It includes the private cause and is meant for
// logs, never for the wire.
func (f *Failure) Error() string {
	if f.cause == nil {
		return fmt.Sprintf("%s: %s", f.code, f.message)
	}
	return fmt.Sprintf("%s: %s: %v", f.code, f.message, f.cause)
}

// Unwrap returns the private cause.
func (f *Failure) Unwrap() error { return f.cause }

// WithDetails returns a copy of f whose structured content also carries the
// given caller-safe diagnostics beside the failure envelope.
func (f *Failure) WithDetails(details map[string]any) *Failure {
	g := *f
	g.details = details
	return &g
}

// envelope is the wire shape of a failure.
func (f *Failure) envelope() map[string]any {
	m := map[string]any{
		"failure": map[string]any{
			"code":      string(f.code),
			"message":   f.message,
			"retryable": f.Retryable(),
		},
	}
	for k, v := range f.details {
		if k != "failure" {
			m[k] = v
		}
	}
	return m
}

// asFailure classifies any error as a failure.
func asFailure(err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	return &Failure{code: CodeInternal, message: internalMessage, cause: err}
}
