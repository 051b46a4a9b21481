package executor

import (
	"context"
	"encoding/json"
)

// SessionOpener opens the tool host of a session when the harness assigns
// it to the executor. An error refuses the assignment; an *RPCError's
// data.reason (for example "workspace_unavailable") is passed on as the
// refusal reason.
type SessionOpener interface {
	OpenSession(ctx context.Context, a Assignment) (Session, error)
}

// Session runs the tool calls of one assigned session.
type Session interface {
	// CallTool runs one tool call. Failures are results with IsError set;
	// when ctx is canceled the call stops and reports error_code
	// "canceled" (or "timeout" at its deadline).
	CallTool(ctx context.Context, name string, input json.RawMessage) ToolResult
	// Close stops everything the session started.
	Close() error
}

// ProcessHost is implemented by a [Session] that runs processes (the
// process capability). Errors are *RPCError values whose data.reason is
// "spawn_failed" or "process_id_spec_mismatch" where they apply.
type ProcessHost interface {
	StartProcess(ctx context.Context, p ProcessStart, onExit func(ProcessExit)) (ProcessInfo, error)
	SignalProcess(ctx context.Context, p ProcessSignal) (ProcessState, error)
}

// TerminalHost is implemented by a [Session] that runs pseudo-terminals
// (the process.pty capability). Errors are *RPCError values with
// data.terminal_code.
type TerminalHost interface {
	OpenTerminal(ctx context.Context, p TerminalOpen, output func(TerminalOutput), exit func(TerminalExit)) (TerminalRef, error)
	WriteTerminal(ctx context.Context, p TerminalInput) error
	ResizeTerminal(ctx context.Context, p TerminalResize) error
	CloseTerminal(ctx context.Context, p TerminalRef) error
}
