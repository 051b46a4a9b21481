package tools

import (
	"errors"
	"fmt"
)

// Error codes of a failed tool result. The set is open.
const (
	CodeWorkspaceBoundary = "workspace_boundary"
	CodeWorkspaceReadOnly = "workspace_read_only"
	CodeTimeout           = "timeout"
	CodeCanceled          = "canceled"
	CodeInvalidInput      = "invalid_input"
	CodeNotFound          = "not_found"
	CodeUnknownTool       = "unknown_tool"
	CodeToolFailed        = "tool_failed"
	CodeSpawnFailed       = "spawn_failed"
	CodeSpecMismatch      = "process_id_spec_mismatch"
)

// Terminal error codes (terminal_code of a failed terminal.* call).
const (
	TerminalNotFound    = "terminal_not_found"
	TerminalClosed      = "terminal_closed"
	TerminalUnavailable = "pty_unavailable"
	TerminalLimit       = "terminal_limit"
)

// Block is one content block of a result.
type Block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Result is the outcome of one tool call. A failure is a Result with
// IsError set and, for failures a program should tell apart, an ErrorCode.
type Result struct {
	Content   []Block
	IsError   bool
	ErrorCode string
}

// Text returns the concatenated text of the result's blocks.
func (r Result) Text() string {
	var s string
	for _, b := range r.Content {
		s += b.Text
	}
	return s
}

func textResult(s string) Result { return Result{Content: []Block{{Type: "text", Text: s}}} }

func errorResult(err error) Result {
	code := CodeToolFailed
	var te *Error
	if errors.As(err, &te) {
		code = te.Code
	}
	return Result{Content: []Block{{Type: "text", Text: err.Error()}}, IsError: true, ErrorCode: code}
}

// Error is a tool failure with a machine-readable code.
type Error struct {
	// Code is the error code, for example [CodeWorkspaceBoundary].
	Code string
	// Msg explains the failure to the model.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns Code.
func (e *Error) ErrorCode() string { return e.Code }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// truncate caps s at max bytes and appends a marker saying how much was cut.
func truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("\n[output truncated: %d of %d bytes omitted]", len(s)-max, len(s))
}
