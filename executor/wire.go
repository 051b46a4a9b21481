package executor

import (
	"encoding/json"
	"time"
)

// Methods of reins.executor.v1.
const (
	MethodRegister       = "executor.register"
	MethodHeartbeat      = "executor.heartbeat"
	MethodClose          = "executor.close"
	MethodSessionAssign  = "session.assign"
	MethodSessionRelease = "session.release"
	MethodToolCall       = "tool.call"
	MethodToolCancel     = "tool.cancel"
	MethodToolResult     = "tool.result"
	MethodProcessStart   = "process.start"
	MethodProcessSignal  = "process.signal"
	MethodProcessExit    = "process.exit"
	MethodTerminalOpen   = "terminal.open"
	MethodTerminalInput  = "terminal.input"
	MethodTerminalResize = "terminal.resize"
	MethodTerminalClose  = "terminal.close"
	MethodTerminalOutput = "terminal.output"
	MethodTerminalExit   = "terminal.exit"
)

// Capabilities an executor declares in executor.register. A tool named n is
// the capability "tool:"+n.
const (
	CapabilityProcess    = "process"
	CapabilityProcessPTY = "process.pty"
	CapabilityAgent      = "agent"
)

// ToolCapability returns the capability that declares tool name.
func ToolCapability(name string) string { return "tool:" + name }

// Release reasons of session.release.
const (
	ReleaseEnded        = "ended"
	ReleaseLeaseExpired = "lease_expired"
	ReleaseReassigned   = "reassigned"
)

// ExecutorInfo describes an executor in the token request and in
// executor.register.
type ExecutorInfo struct {
	Name     string `json:"name"`
	Version  string `json:"version,omitempty"`
	OS       string `json:"os,omitempty"`
	Arch     string `json:"arch,omitempty"`
	Hostname string `json:"hostname,omitempty"`
}

// SessionLease names a session and the lease under which it is held.
type SessionLease struct {
	SessionID string `json:"session_id"`
	LeaseID   string `json:"lease_id"`
}

// LostSession is a session the harness no longer places on the executor.
type LostSession struct {
	SessionID string `json:"session_id"`
	Reason    string `json:"reason"`
}

type RegisterParams struct {
	Protocol     string         `json:"protocol"`
	Executor     ExecutorInfo   `json:"executor"`
	Capabilities []string       `json:"capabilities"`
	MaxSessions  int            `json:"max_sessions"`
	Sessions     []SessionLease `json:"sessions"`
	// Features lists the optional protocol features the executor speaks
	// (see [FeatureTranscriptDeltas]).
	Features []string `json:"features,omitempty"`
}

type RegisterResult struct {
	ExecutorID          string        `json:"executor_id"`
	HeartbeatIntervalMS int64         `json:"heartbeat_interval_ms"`
	LeaseTTLMS          int64         `json:"lease_ttl_ms"`
	Resumed             []string      `json:"resumed"`
	Lost                []LostSession `json:"lost"`
	// Features lists the optional protocol features the harness speaks
	// (see [FeatureResultInAck]).
	Features []string `json:"features,omitempty"`
}

// FeatureResultInAck is the protocol feature "result_in_ack": the harness
// accepts a tool call's result inside the tool.call response
// ({accepted:true, result:{…}}), so that a tool that finishes quickly costs
// two frames instead of four. Only an executor whose registration result
// lists it may answer that way; it still keeps the result until a later
// heartbeat proves the harness read it, and resends it as tool.result after
// a reconnect.
const FeatureResultInAck = "result_in_ack"

type HeartbeatParams struct {
	Sessions []SessionLease `json:"sessions"`
}

type RenewedLease struct {
	SessionID      string    `json:"session_id"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

type HeartbeatResult struct {
	Renewed []RenewedLease `json:"renewed"`
	Lost    []LostSession  `json:"lost"`
}

type CloseParams struct {
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// WorkspaceSpec describes the workspace of an assigned session.
type WorkspaceSpec struct {
	ReadOnly bool `json:"read_only"`
}

// Assignment is the session.assign request: the harness places a session on
// the executor under a lease.
type Assignment struct {
	SessionID      string        `json:"session_id"`
	LeaseID        string        `json:"lease_id"`
	LeaseExpiresAt time.Time     `json:"lease_expires_at"`
	EnvironmentID  string        `json:"environment_id"`
	Workspace      WorkspaceSpec `json:"workspace"`
	Tools          []string      `json:"tools"`
	// Env holds variables for the session's tools (NAME -> value), such
	// as its environment_variable credentials.
	Env map[string]string `json:"env,omitempty"`
	// Memory are the session's memory stores. An executor that keeps
	// them (the built-in toolset in sandboxes does) shows each at its
	// MountPath and syncs it with the server's memory endpoints around
	// each tool call, with SessionsToken as the bearer credential.
	Memory []MemoryMount `json:"memory,omitempty"`
	// SessionsToken authorizes requests about this session, its memory
	// stores included, for the session's lifetime (set with Memory).
	SessionsToken string `json:"sessions_token,omitempty"`
}

// MemoryMount is one memory store of an assigned session.
type MemoryMount struct {
	MemoryStoreID string `json:"memory_store_id"`
	// MountPath is where the session's tools see the store
	// (/mnt/memory/<slug>).
	MountPath string `json:"mount_path"`
	// Access is "read_write" or "read_only".
	Access string `json:"access"`
}

type AssignResult struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	// Message says why the session was refused, for the model and the
	// operator, when Reason alone does not (optional).
	Message string `json:"message,omitempty"`
}

type ReleaseParams struct {
	SessionID string `json:"session_id"`
	LeaseID   string `json:"lease_id"`
	Reason    string `json:"reason"`
}

type ToolCallParams struct {
	SessionID  string          `json:"session_id"`
	LeaseID    string          `json:"lease_id"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	TimeoutMS  int64           `json:"timeout_ms,omitempty"`
}

type ToolCallAck struct {
	Accepted bool `json:"accepted"`
	// Result is the call's outcome when it finished before the
	// acknowledgement was sent ([FeatureResultInAck]).
	Result *ToolResult `json:"result,omitempty"`
}

type ToolCancelParams struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Reason     string `json:"reason"`
}

// ContentBlock is one block of a tool result.
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// TextBlock returns a text content block.
func TextBlock(text string) ContentBlock { return ContentBlock{Type: "text", Text: text} }

// ToolResult is the outcome of a tool call. A tool that ran and failed, or
// a policy refusal inside the call, is a ToolResult with IsError set and an
// ErrorCode such as "workspace_boundary" or "timeout"; the model reads it.
type ToolResult struct {
	Content   []ContentBlock `json:"content"`
	IsError   bool           `json:"is_error"`
	ErrorCode string         `json:"error_code,omitempty"`
}

type ToolResultParams struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	ToolResult
}

type ToolResultAck struct {
	Duplicate bool `json:"duplicate"`
}

// PTYSize is the size of a pseudo-terminal.
type PTYSize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// ProcessSpec describes a process to start in a session's workspace.
type ProcessSpec struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	PTY  *PTYSize          `json:"pty,omitempty"`
}

// ProcessStart is the process.start request.
type ProcessStart struct {
	SessionID string      `json:"session_id"`
	ProcessID string      `json:"process_id"`
	Spec      ProcessSpec `json:"spec"`
}

// ProcessInfo is the result of process.start.
type ProcessInfo struct {
	ProcessID string `json:"process_id"`
	PID       int    `json:"pid"`
	State     string `json:"state"`
}

// ProcessSignal is the process.signal request.
type ProcessSignal struct {
	SessionID string `json:"session_id"`
	ProcessID string `json:"process_id"`
	Signal    string `json:"signal"`
}

// ProcessState is the result of process.signal.
type ProcessState struct {
	State string `json:"state"`
}

// ProcessExit is the process.exit notification.
type ProcessExit struct {
	SessionID string `json:"session_id"`
	ProcessID string `json:"process_id"`
	State     string `json:"state"`
	ExitCode  int    `json:"exit_code"`
	Reason    string `json:"reason,omitempty"`
}

// TerminalOpen is the terminal.open request; its result is a TerminalRef.
type TerminalOpen struct {
	SessionID  string   `json:"session_id"`
	TerminalID string   `json:"terminal_id,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	Cols       uint16   `json:"cols"`
	Rows       uint16   `json:"rows"`
}

// TerminalRef names a terminal of a session.
type TerminalRef struct {
	SessionID  string `json:"session_id"`
	TerminalID string `json:"terminal_id"`
}

// TerminalInput is the terminal.input request; Data is base64 on the wire.
type TerminalInput struct {
	SessionID  string `json:"session_id"`
	TerminalID string `json:"terminal_id"`
	Data       []byte `json:"data"`
}

// TerminalResize is the terminal.resize request.
type TerminalResize struct {
	SessionID  string `json:"session_id"`
	TerminalID string `json:"terminal_id"`
	Cols       uint16 `json:"cols"`
	Rows       uint16 `json:"rows"`
}

// TerminalOutput is the terminal.output notification.
type TerminalOutput struct {
	SessionID  string `json:"session_id"`
	TerminalID string `json:"terminal_id"`
	Data       []byte `json:"data"`
}

// TerminalExit is the terminal.exit notification.
type TerminalExit struct {
	SessionID  string `json:"session_id"`
	TerminalID string `json:"terminal_id"`
	ExitCode   int    `json:"exit_code"`
}
