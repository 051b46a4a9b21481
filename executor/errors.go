package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/coder/websocket"
)

// JSON-RPC error codes of reins.executor.v1.
const (
	CodeParseError            = -32700 // the frame is not JSON
	CodeInvalidRequest        = -32600 // the frame is not a JSON-RPC 2.0 message
	CodeMethodNotFound        = -32601 // unknown method
	CodeInvalidParams         = -32602 // params fail the method's schema
	CodeInternalError         = -32603 // bug or unexpected failure
	CodeUnauthorized          = -32000 // missing or expired credential
	CodeForbidden             = -32001 // acting on a session or process the caller does not hold
	CodeNotFound              = -32002 // unknown session, tool call, process
	CodeLeaseExpired          = -32003 // the caller's lease is gone
	CodeTimeout               = -32004 // request deadline passed (retryable)
	CodeCanceled              = -32005 // canceled by the peer
	CodePayloadTooLarge       = -32006 // frame or field over its limit
	CodeSessionNotActive      = -32007 // session ended or not assigned here
	CodeMCPUnavailable        = -32008 // an MCP server the call needs cannot be reached
	CodeExecutorBusy          = -32009 // at max_sessions or out of slots (retryable)
	CodeUnsupportedProtocol   = -32010 // protocol version not spoken
	CodeResourceUnavailable   = -32011 // transient capacity problem (retryable)
	CodeCapabilityUnavailable = -32012 // capability not declared (data.capability)
	CodeConflict              = -32013 // sequence gap or spec mismatch
)

var codeNames = map[int]string{
	CodeParseError:            "parse_error",
	CodeInvalidRequest:        "invalid_request",
	CodeMethodNotFound:        "method_not_found",
	CodeInvalidParams:         "invalid_params",
	CodeInternalError:         "internal_error",
	CodeUnauthorized:          "unauthorized",
	CodeForbidden:             "forbidden",
	CodeNotFound:              "not_found",
	CodeLeaseExpired:          "lease_expired",
	CodeTimeout:               "timeout",
	CodeCanceled:              "canceled",
	CodePayloadTooLarge:       "payload_too_large",
	CodeSessionNotActive:      "session_not_active",
	CodeMCPUnavailable:        "mcp_unavailable",
	CodeExecutorBusy:          "executor_busy",
	CodeUnsupportedProtocol:   "unsupported_protocol",
	CodeResourceUnavailable:   "resource_unavailable",
	CodeCapabilityUnavailable: "capability_unavailable",
	CodeConflict:              "conflict",
}

// CodeMessage returns the protocol's message for a JSON-RPC error code, for
// example "payload_too_large" for -32006, or "" for a code the protocol does
// not define.
func CodeMessage(code int) string { return codeNames[code] }

// Recommended values of [JSONRPCErrorData.Reason] and of the error_code of a
// tool result. The set is open: receivers pass unknown values through.
const (
	ReasonWorkspaceUnavailable     = "workspace_unavailable"
	ReasonWorkspaceBoundary        = "workspace_boundary"
	ReasonWorkspaceReadOnly        = "workspace_read_only"
	ReasonSessionRejected          = "session_rejected"
	ReasonLocalConfirmationDenied  = "local_confirmation_denied"
	ReasonLocalConfirmationExpired = "local_confirmation_expired"
	ReasonSpawnFailed              = "spawn_failed"
	ReasonProcessIDSpecMismatch    = "process_id_spec_mismatch"
	ReasonCapabilityMissing        = "capability_missing"
	// ReasonMCPConnectionFailed is the session.error type of a turn.start
	// refused because an MCP server the turn needs cannot be reached
	// ([MCPUnavailable]).
	ReasonMCPConnectionFailed = "mcp_connection_failed_error"
)

// MCPUnavailable is the refusal of an agent end that cannot reach server,
// an MCP server of the session's agent that its turn needs: -32008
// mcp_unavailable with data.reason [ReasonMCPConnectionFailed] (the
// session.error type the harness records), data.mcp_server_name and
// data.retryable (the harness retries the turn with its retry policy,
// then ends it with retries_exhausted). Return it from
// [Options.AcceptTurn].
func MCPUnavailable(server string, err error) *RPCError {
	e := WithReason(CodeMCPUnavailable, ReasonMCPConnectionFailed, "")
	e.Data.MCPServerName = server
	e.Data.Retryable = ptr(true)
	e.Data.Detail = fmt.Sprintf("MCP server %s cannot be reached: %v", server, err)
	return e
}

// Close codes with which the harness ends an executor connection.
const (
	CloseTokenExpired        = 4001 // the executor token expired: refresh it and reconnect
	CloseRegistrationRefused = 4002 // runtime registration refused
	CloseUnsupportedProtocol = 4003 // terminal: the protocol version is not spoken
	CloseReplaced            = 4004 // terminal: a newer connection with the same identity took over
	CloseDrained             = 4005 // the harness node is shutting down: reconnect with backoff
)

// IsTerminalCloseCode reports whether a connection closed with code ends the
// client for good instead of reconnecting: 4003 (unsupported protocol) and
// 4004 (replaced).
func IsTerminalCloseCode(code int) bool {
	return code == CloseUnsupportedProtocol || code == CloseReplaced
}

// CloseCode returns the WebSocket close code carried by err (for example
// 4004 when the client ended with [ErrReplaced]), or -1 when err does not
// come from a closed connection.
func CloseCode(err error) int {
	var ce *closeError
	if errors.As(err, &ce) {
		return ce.code
	}
	if code := websocket.CloseStatus(err); code != -1 {
		return int(code)
	}
	return -1
}

// closeError records the close code and reason a connection ended with.
type closeError struct {
	code   int
	reason string
}

func (e *closeError) Error() string {
	return fmt.Sprintf("connection closed with %d %q", e.code, e.reason)
}

// JSONRPCErrorData is the data member of a JSON-RPC error.
type JSONRPCErrorData struct {
	// Retryable marks a capacity or timeout failure the caller should
	// retry with backoff.
	Retryable *bool `json:"retryable,omitempty"`
	// Detail is a human-readable explanation.
	Detail string `json:"detail,omitempty"`
	// Capability names the missing capability of a -32012 error, for
	// example "tool:read" or "process.pty".
	Capability string `json:"capability,omitempty"`
	// Reason is a machine-readable cause from an open set (see the
	// Reason… constants); receivers pass values they do not know through.
	Reason string `json:"reason,omitempty"`
	// TerminalCode is the terminal error code of a failed terminal.* call.
	TerminalCode string `json:"terminal_code,omitempty"`
	// ExpectedSequence is the sequence the harness expects next after an
	// agent session.event gap (-32013).
	ExpectedSequence *int64 `json:"expected_sequence,omitempty"`
	// MCPServerName names the MCP server of a -32008 mcp_unavailable (a
	// reins addition to the protocol's data; see [MCPUnavailable]).
	MCPServerName string `json:"mcp_server_name,omitempty"`
}

// JSONRPCError is the wire form of a JSON-RPC error object.
type JSONRPCError struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Data    *JSONRPCErrorData `json:"data,omitempty"`
}

// RPCError is a JSON-RPC error returned by the peer, or returned by a
// handler to answer with a specific code and data. A handler that returns an
// *RPCError (possibly wrapped) keeps its code on the wire; any other error
// is answered with -32603 internal_error.
type RPCError struct {
	Code    int
	Message string
	Data    *JSONRPCErrorData
}

// NewRPCError returns an error with code and message. An empty message
// becomes the code's protocol message. Codes the protocol marks retryable
// (-32004, -32009, -32011) get data.retryable = true.
func NewRPCError(code int, message string) *RPCError {
	if message == "" {
		message = CodeMessage(code)
	}
	e := &RPCError{Code: code, Message: message}
	switch code {
	case CodeTimeout, CodeExecutorBusy, CodeResourceUnavailable:
		t := true
		e.Data = &JSONRPCErrorData{Retryable: &t}
	}
	return e
}

// WithReason returns an error with code, message and data.reason set to
// reason, the way a handler refuses with a machine-readable cause.
func WithReason(code int, reason, message string) *RPCError {
	e := NewRPCError(code, message)
	if e.Data == nil {
		e.Data = &JSONRPCErrorData{}
	}
	e.Data.Reason = reason
	return e
}

// Error implements error.
func (e *RPCError) Error() string {
	s := fmt.Sprintf("jsonrpc error %d %s", e.Code, e.Message)
	if e.Data != nil {
		if e.Data.Reason != "" {
			s += " (reason " + e.Data.Reason + ")"
		}
		if e.Data.Capability != "" {
			s += " (capability " + e.Data.Capability + ")"
		}
		if e.Data.Detail != "" {
			s += ": " + e.Data.Detail
		}
	}
	return s
}

// Retryable reports whether data.retryable is set and true: a capacity or
// timeout failure that the caller should retry with backoff.
func (e *RPCError) Retryable() bool {
	return e.Data != nil && e.Data.Retryable != nil && *e.Data.Retryable
}

// Reason returns data.reason, or "".
func (e *RPCError) Reason() string {
	if e.Data == nil {
		return ""
	}
	return e.Data.Reason
}

// ToWire returns the JSON-RPC error object sent on the wire.
func (e *RPCError) ToWire() JSONRPCError {
	return JSONRPCError{Code: e.Code, Message: e.Message, Data: e.Data}
}

// WithDetail sets data.detail, a human-readable explanation, and returns e.
func (e *RPCError) WithDetail(detail string) *RPCError {
	if e.Data == nil {
		e.Data = &JSONRPCErrorData{}
	}
	e.Data.Detail = detail
	return e
}

// Client errors.
var (
	// ErrNotConnected is returned when a call is attempted while the
	// channel is not open (yet, or any more).
	ErrNotConnected = errors.New("executor: executor channel is not connected")
	// ErrClientStopped is returned after Stop or a terminal close code.
	ErrClientStopped = errors.New("executor: client stopped")
	// ErrReplaced is Err after the harness closed with 4004: a newer
	// connection for this executor is authoritative and this one must stop.
	ErrReplaced = errors.New("executor: executor connection was replaced (4004)")
	// ErrReconnectExhausted is Err after a positive MaxReconnectAttempts
	// failed; it wraps the last failure.
	ErrReconnectExhausted = errors.New("executor: executor reconnect attempts exhausted")
	// ErrCredentialRejected is wrapped by the token request error when the
	// token endpoint answers 401 or 403 (an invalid or revoked environment
	// key or machine token). A reconnect does not retry it: the client ends
	// with it as Err. A TokenSource may wrap it for the same effect, and a
	// Credentials implementation returns it for an unknown credential.
	ErrCredentialRejected = errors.New("executor: executor credential rejected")
	// ErrRegistrationRefused is Err after the platform refused the
	// executor's registration MaxRefusedRegistrations times in a row: the
	// close 4002 right after executor.register, or an executor.register
	// error for the executor's capabilities. It is a configuration error (a
	// machine-scoped executor must declare the process or agent capability)
	// that reconnecting cannot fix. It wraps the last refusal.
	ErrRegistrationRefused = errors.New("executor: executor registration refused")
)

// ErrSessionEnded is returned for requests on a session that has ended; a
// handler that returns it answers -32007 session_not_active.
var ErrSessionEnded = errors.New("executor: session ended")

// RequestTimeoutError is returned when a request got no response before its
// deadline. It matches [context.DeadlineExceeded] with errors.Is.
type RequestTimeoutError struct {
	// Method is the JSON-RPC method of the request.
	Method string
}

// Error implements error.
func (e *RequestTimeoutError) Error() string {
	return fmt.Sprintf("executor: request %s timed out", e.Method)
}

// Unwrap returns context.DeadlineExceeded.
func (e *RequestTimeoutError) Unwrap() error { return context.DeadlineExceeded }
