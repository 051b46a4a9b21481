// Package tool is the contract between the harness, which decides which
// tool calls a session makes, and the tool host, which runs them: built-in
// tools on executors and in sandboxes, web_fetch, and remote MCP servers.
// It imports only the wire types, so that the code on either side (and
// egress code such as webfetch) needs neither the other side nor a store.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// Call is a built-in tool call the harness dispatches.
type Call struct {
	// ID is the id of the agent.tool_use event.
	ID    string
	Name  string
	Input json.RawMessage
	// Timeout bounds the call on the machine that runs it (0: that
	// machine's default).
	Timeout time.Duration
}

// Result is the outcome of a tool call.
type Result struct {
	Content []ma.ContentBlock
	IsError bool
	// ErrorCode says why an error result failed, when a program should
	// tell it apart (for example "workspace_boundary", "timeout" or
	// "tool_outcome_unknown"); the model reads only Content.
	ErrorCode string
	// Errors are session errors met while readying the call that did not
	// fail it (a repository that could not be cloned: the tool ran
	// without it); the runner logs each as a session.error before the
	// result.
	Errors []ma.SessionError
}

// Runner runs built-in tools (bash, read, write, edit, glob, grep) for a
// session. The executor hub implements it; a Runner must return when ctx
// is cancelled.
type Runner interface {
	RunTool(ctx context.Context, sess *ma.Session, call Call) Result
}

// Placer is implemented by a Runner that must place a session on a
// machine before its tools can run (the executor hub).
type Placer interface {
	// Place readies the session's tools. It returns nil when they can run
	// now; otherwise a Wait (the session waits in "rescheduling"). An
	// error means the tools cannot run: each call then gets an error
	// result.
	Place(ctx context.Context, sess *ma.Session) (*Wait, error)
	// Release frees what Place took for the session; the runner calls it
	// when it leaves.
	Release(sessionID string)
	// Idle tells that the session went idle: what Place took may be handed
	// to another session until the next Place.
	Idle(sessionID string)
}

// Wait says that a session's tools cannot be placed yet.
type Wait struct {
	// C is closed when placement may have become possible.
	C <-chan struct{}
	// Reason tells the user why the session waits; it is the reason of
	// its session.status_rescheduled event.
	Reason string
}

// WorkerHost is the link to pull workers (the work queue of self-hosted
// environments): sessions they serve get their built-in tools run by the
// worker, which answers each agent.tool_use with a user.tool_result.
type WorkerHost interface {
	// Serving reports whether pull workers serve the session (client) and
	// whether one holds it now (present).
	Serving(ctx context.Context, sess *ma.Session) (client, present bool, err error)
	// NeedWorker asks for a worker for the session (enqueues work).
	NeedWorker(ctx context.Context, sess *ma.Session) error
	// SessionIdle tells that the session went idle with nothing for a
	// worker to do: work queued for it retires.
	SessionIdle(ctx context.Context, sess *ma.Session) error
}

// ErrorResult is an error tool result with one text block.
func ErrorResult(text string) Result {
	return Result{IsError: true, Content: []ma.ContentBlock{{Type: "text", Text: text}}}
}

// MCPHost reaches the remote MCP servers of a session's agent (the
// connector, with the session's vault credentials).
type MCPHost interface {
	// Tools lists the tools of the agent's MCP servers, connecting as
	// needed. A connection-level failure is an *MCPError.
	Tools(ctx context.Context, sess *ma.Session) ([]MCPTool, error)
	// Call calls a tool. A tool that fails is a result with IsError; a
	// connection-level failure is an *MCPError.
	Call(ctx context.Context, sess *ma.Session, server, tool string, input json.RawMessage) (Result, error)
	// Release closes the session's connections (the runner leaves).
	Release(sessionID string)
}

// MCPTool is a tool of an MCP server as offered to the model.
type MCPTool struct {
	// Name is the model-facing name (unique, [A-Za-z0-9_-]{1,128}).
	Name string
	// Server is the agent's name for the server; Tool the server's name
	// for the tool.
	Server, Tool string
	Description  string
	InputSchema  json.RawMessage
}

// MCPError is a connection-level failure of an MCP server, reported as a
// session.error.
type MCPError struct {
	// Type is mcp_connection_failed_error or
	// mcp_authentication_failed_error.
	Type      string
	Server    string
	Message   string
	Retryable bool
	Err       error
}

func (e *MCPError) Error() string { return fmt.Sprintf("MCP server %s: %s", e.Server, e.Message) }

// Unwrap returns the underlying error.
func (e *MCPError) Unwrap() error { return e.Err }
