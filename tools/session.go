package tools

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// Session holds the tool state of one agent session in a workspace: its
// persistent shell, processes and terminals. Its methods are safe for
// concurrent use; Close stops everything it started.
type Session struct {
	w     *Workspace
	bash  bashRunner
	procs processes
	terms terminals

	mu     sync.Mutex // guards closed
	closed bool
}

// NewSession returns a session over w. The caller keeps ownership of w.
func NewSession(w *Workspace) *Session {
	s := &Session{w: w}
	s.bash.w = w
	s.procs.init(w)
	s.terms.init(w)
	return s
}

// Workspace returns the session's workspace.
func (s *Session) Workspace() *Workspace { return s.w }

// ErrSessionClosed is returned for calls on a closed session.
var ErrSessionClosed = errors.New("tools: session closed")

// Call runs the built-in tool name with its JSON input. Every failure,
// including invalid input, is a Result with IsError set.
func (s *Session) Call(ctx context.Context, name string, input json.RawMessage) Result {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errorResult(&Error{Code: CodeCanceled, Msg: "the session was closed"})
	}
	in, err := DecodeInput(name, input)
	if err != nil {
		return errorResult(err)
	}
	if err := ctx.Err(); err != nil {
		return errorResult(&Error{Code: CodeCanceled, Msg: "the call was canceled", Err: err})
	}
	var out string
	switch in := in.(type) {
	case *BashInput:
		if !in.Restart || in.Command != "" {
			if err := s.w.mutable(); err != nil {
				return errorResult(err)
			}
		}
		return s.bash.call(ctx, in)
	case *ReadInput:
		out, err = s.w.Read(in)
	case *WriteInput:
		out, err = s.w.Write(in)
	case *EditInput:
		out, err = s.w.Edit(in)
	case *GlobInput:
		out, err = s.w.Glob(in)
	case *GrepInput:
		out, err = s.w.Grep(in)
	}
	if err != nil {
		return errorResult(err)
	}
	return textResult(out)
}

// Close stops the shell, every process and every terminal of the session.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.terms.closeAll()
	s.procs.killAll()
	s.bash.close()
	return nil
}
