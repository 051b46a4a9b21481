package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/reinsdev/reins/tools"
	"github.com/reinsdev/reins/tools/toolset"
)

// BuiltinCapabilities are the capabilities of the built-in toolset.
func BuiltinCapabilities() []string {
	caps := []string{CapabilityProcess, CapabilityProcessPTY}
	for _, n := range toolset.Names() {
		caps = append(caps, ToolCapability(n))
	}
	return caps
}

// BuiltinSessions is the [SessionOpener] of the built-in toolset (package
// tools): each session works in its own subdirectory of Dir, named after
// the session, and runs its bash, processes and terminals in a sandbox of
// its own ([Sandboxes]) unless the caller opts out with Unconfined or
// NoSandbox. It never falls back to running them unconfined: when the
// sandbox cannot start, [BuiltinSessions.Prepare] (which [Client.Run]
// calls) fails with an error wrapping [ErrSandboxUnavailable].
type BuiltinSessions struct {
	// Dir is the directory that holds the session workspaces.
	Dir string
	// Unconfined runs the sessions' processes on this host, as this
	// process's user, instead of in a sandbox per session: they read
	// whatever this user reads (the environment of this and other
	// processes in /proc, /etc/shadow when it is root) and reach any
	// address. Landlock keeps their writes in the workspace where the
	// kernel has it. Only for a machine where model-written commands
	// can do no harm (a throwaway container or VM).
	Unconfined bool
	// NoSandbox is Unconfined without Landlock either.
	NoSandbox bool
	// Sandbox configures the sandboxes (when neither Launchers nor
	// Unconfined nor NoSandbox is set); its StateDir defaults to
	// Dir/.reins-sandboxes.
	Sandbox SandboxOptions
	// Launchers, if set, starts each session's processes instead of the
	// default sandboxes. The workspace closes the launcher when the
	// session ends.
	Launchers LauncherFactory
	// Owner, if set, owns the files the file tools create (the user the
	// launched processes run as, when that is not this process's; default
	// the sandboxes' user).
	Owner *tools.Owner
	// MaxOutputBytes caps one tool result (default tools.DefaultMaxOutputBytes).
	MaxOutputBytes int
	// ServerURL and HTTPClient reach the server's memory endpoints, with
	// which the sandboxed sessions' memory stores are kept in sync
	// (default: the Client's Options.URL and HTTPClient).
	ServerURL  string
	HTTPClient *http.Client
	// Logger receives diagnostics.
	Logger *slog.Logger

	mu  sync.Mutex // guards own
	own *Sandboxes // the default sandboxes, made by Prepare or the first session
}

// A LauncherFactory makes the launcher of an assigned session's bash,
// processes and terminals (see [tools.Launcher]).
type LauncherFactory interface {
	Launcher(ctx context.Context, a Assignment, dir string) (tools.Launcher, error)
}

// Prepare makes the default sandboxes, checking that one starts, unless
// Launchers, Unconfined or NoSandbox is set. [Client.Run] calls it before
// it connects, so that an executor whose tools cannot be sandboxed stops
// at once and says why; without it the first session does it.
func (b *BuiltinSessions) Prepare(ctx context.Context) error {
	_, _, err := b.launchers(ctx)
	return err
}

// Close tears the default sandboxes down with everything in them.
func (b *BuiltinSessions) Close() error {
	b.mu.Lock()
	own := b.own
	b.own = nil
	b.mu.Unlock()
	if own == nil {
		return nil
	}
	return own.Close()
}

// launchers returns the launcher factory of the sessions' processes (nil:
// on this host) and the owner of the files the tools create.
func (b *BuiltinSessions) launchers(ctx context.Context) (LauncherFactory, *tools.Owner, error) {
	if b.Launchers != nil || b.Unconfined || b.NoSandbox {
		return b.Launchers, b.Owner, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.own == nil {
		o := b.Sandbox
		if o.StateDir == "" {
			o.StateDir = filepath.Join(b.Dir, ".reins-sandboxes")
		}
		if o.Logger == nil {
			o.Logger = b.Logger
		}
		s, err := NewSandboxes(ctx, o)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (set BuiltinSessions.Unconfined to run the tools on this host without a sandbox, "+
				"only where model-written commands can do no harm)", err)
		}
		b.own = s
	}
	owner := b.Owner
	if owner == nil {
		owner = b.own.Owner()
	}
	return b.own, owner, nil
}

var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// OpenSession creates (or reopens) the session's workspace directory.
func (b *BuiltinSessions) OpenSession(ctx context.Context, a Assignment) (Session, error) {
	if !safeID.MatchString(a.SessionID) || a.SessionID == ".." {
		return nil, WithReason(CodeInvalidParams, ReasonSessionRejected, "session id is not usable as a directory name")
	}
	dir := filepath.Join(b.Dir, a.SessionID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, WithReason(CodeResourceUnavailable, ReasonWorkspaceUnavailable, err.Error())
	}
	env := make([]string, 0, len(a.Env))
	for k, v := range a.Env {
		env = append(env, k+"="+v)
	}
	launchers, owner, err := b.launchers(ctx)
	if err != nil {
		return nil, WithReason(CodeResourceUnavailable, ReasonWorkspaceUnavailable, err.Error())
	}
	opts := tools.WorkspaceOptions{
		ReadOnly: a.Workspace.ReadOnly, NoSandbox: b.NoSandbox,
		MaxOutputBytes: b.MaxOutputBytes, Env: env, Logger: b.Logger, Owner: owner,
	}
	mounts, err := memoryMounts(a, dir)
	if err != nil {
		return nil, WithReason(CodeInvalidParams, ReasonSessionRejected, err.Error())
	}
	if launchers != nil {
		l, err := launchers.Launcher(ctx, a, dir)
		if err != nil {
			return nil, WithReason(CodeResourceUnavailable, ReasonWorkspaceUnavailable, err.Error())
		}
		opts.Launcher = l
	}
	w, err := tools.OpenWorkspace(dir, opts)
	if err != nil {
		if opts.Launcher != nil {
			opts.Launcher.Close()
		}
		return nil, WithReason(CodeResourceUnavailable, ReasonWorkspaceUnavailable, err.Error())
	}
	s := &builtinSession{w: w, s: tools.NewSession(w)}
	switch _, sandboxed := launchers.(*Sandboxes); {
	case len(mounts) == 0:
		return s, nil
	case sandboxed:
		return withMemory(s, a, mounts, b.ServerURL, b.HTTPClient, owner), nil
	default:
		return &unmountedSession{builtinSession: s}, nil
	}
}

// builtinSession adapts a tools.Session to Session, ProcessHost and
// TerminalHost.
type builtinSession struct {
	w *tools.Workspace
	s *tools.Session
}

func (b *builtinSession) CallTool(ctx context.Context, name string, input json.RawMessage) ToolResult {
	r := b.s.Call(ctx, name, input)
	out := ToolResult{IsError: r.IsError, ErrorCode: r.ErrorCode, Content: make([]ContentBlock, 0, len(r.Content))}
	for _, c := range r.Content {
		out.Content = append(out.Content, ContentBlock{Type: c.Type, Text: c.Text})
	}
	return out
}

func (b *builtinSession) Close() error {
	err := b.s.Close()
	return errors.Join(err, b.w.Close())
}

// toolRPCError turns a tools error into the JSON-RPC error of a process or
// terminal request.
func toolRPCError(err error, terminal bool) error {
	var te *tools.Error
	if !errors.As(err, &te) {
		return err
	}
	code := CodeInternalError
	switch te.Code {
	case tools.CodeNotFound, tools.TerminalNotFound:
		code = CodeNotFound
	case tools.CodeSpecMismatch:
		code = CodeConflict
	case tools.CodeInvalidInput:
		code = CodeInvalidParams
	case tools.CodeWorkspaceBoundary, tools.CodeWorkspaceReadOnly:
		code = CodeForbidden
	case tools.TerminalLimit:
		code = CodeResourceUnavailable
	}
	e := NewRPCError(code, "")
	if e.Data == nil {
		e.Data = &JSONRPCErrorData{}
	}
	e.Data.Detail = te.Error()
	if terminal {
		e.Data.TerminalCode = te.Code
	} else {
		e.Data.Reason = te.Code
	}
	return e
}

func (b *builtinSession) StartProcess(ctx context.Context, p ProcessStart, onExit func(ProcessExit)) (ProcessInfo, error) {
	spec := tools.ProcessSpec{Argv: p.Spec.Argv, Cwd: p.Spec.Cwd, Env: p.Spec.Env}
	if p.Spec.PTY != nil {
		spec.PTY = &tools.PTYSize{Cols: p.Spec.PTY.Cols, Rows: p.Spec.PTY.Rows}
	}
	info, err := b.s.StartProcess(p.ProcessID, spec, func(e tools.ProcessExit) {
		onExit(ProcessExit{SessionID: p.SessionID, ProcessID: e.ProcessID, State: e.State, ExitCode: e.ExitCode, Reason: e.Reason})
	})
	if err != nil {
		return ProcessInfo{}, toolRPCError(err, false)
	}
	return ProcessInfo{ProcessID: info.ProcessID, PID: info.PID, State: info.State}, nil
}

func (b *builtinSession) SignalProcess(ctx context.Context, p ProcessSignal) (ProcessState, error) {
	state, err := b.s.SignalProcess(p.ProcessID, p.Signal)
	if err != nil {
		return ProcessState{}, toolRPCError(err, false)
	}
	return ProcessState{State: state}, nil
}

func (b *builtinSession) OpenTerminal(ctx context.Context, p TerminalOpen, output func(TerminalOutput), exit func(TerminalExit)) (TerminalRef, error) {
	if p.TerminalID == "" {
		p.TerminalID = newTerminalID()
	}
	id := p.TerminalID
	_, err := b.s.OpenTerminal(id, p.Argv, p.Cols, p.Rows,
		func(data []byte) { output(TerminalOutput{SessionID: p.SessionID, TerminalID: id, Data: data}) },
		func(code int) { exit(TerminalExit{SessionID: p.SessionID, TerminalID: id, ExitCode: code}) })
	if err != nil {
		return TerminalRef{}, toolRPCError(err, true)
	}
	return TerminalRef{SessionID: p.SessionID, TerminalID: id}, nil
}

func (b *builtinSession) WriteTerminal(ctx context.Context, p TerminalInput) error {
	return toolRPCError(b.s.WriteTerminal(p.TerminalID, p.Data), true)
}

func (b *builtinSession) ResizeTerminal(ctx context.Context, p TerminalResize) error {
	return toolRPCError(b.s.ResizeTerminal(p.TerminalID, p.Cols, p.Rows), true)
}

func (b *builtinSession) CloseTerminal(ctx context.Context, p TerminalRef) error {
	return toolRPCError(b.s.CloseTerminal(p.TerminalID), true)
}

var _ interface {
	Session
	ProcessHost
	TerminalHost
} = (*builtinSession)(nil)

// newTerminalID returns a random terminal id, for a terminal.open that
// names none.
func newTerminalID() string {
	var b [10]byte
	rand.Read(b[:])
	return "term_" + hex.EncodeToString(b[:])
}
