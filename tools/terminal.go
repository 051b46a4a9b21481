package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/creack/pty"
)

const maxTerminals = 8

type terminal struct {
	proc Proc
	tty  *os.File
	done chan struct{}
}

type terminals struct {
	w *Workspace

	// mu guards the fields below; wg is added to under it, so that
	// closing waits for every terminal's goroutine.
	mu    sync.Mutex
	terms map[string]*terminal
	wg    sync.WaitGroup
}

func (t *terminals) init(w *Workspace) {
	t.w = w
	t.terms = make(map[string]*terminal)
}

func termError(code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// OpenTerminal starts argv (default an interactive bash) on a new
// pseudo-terminal in the workspace. output receives what the terminal
// writes; exit is called once when it ends. An empty id is generated. A
// failure is an *Error whose Code is a terminal code such as
// "pty_unavailable" or "terminal_limit".
func (s *Session) OpenTerminal(id string, argv []string, cols, rows uint16, output func([]byte), exit func(code int)) (string, error) {
	t := &s.terms
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.terms == nil {
		return "", termError(TerminalClosed, "the session was closed")
	}
	if id == "" {
		var b [6]byte
		rand.Read(b[:])
		id = "term_" + hex.EncodeToString(b[:])
	}
	if _, ok := t.terms[id]; ok {
		return "", termError(TerminalLimit, "terminal "+id+" is already open")
	}
	if len(t.terms) >= maxTerminals {
		return "", termError(TerminalLimit, "too many terminals")
	}
	if len(argv) == 0 {
		argv = []string{"bash", "--noprofile", "--norc", "-i"}
	}
	if cols == 0 || rows == 0 {
		cols, rows = 80, 24
	}
	if s.w.opts.ReadOnly {
		return "", &Error{Code: CodeWorkspaceReadOnly, Msg: "the workspace is read-only"}
	}
	spec := LaunchSpec{Argv: argv, Dir: s.w.procDir("."), Env: append(s.w.env(), "TERM=xterm-256color")}
	proc, tty, err := s.w.launchProc(spec, &PTYSize{Cols: cols, Rows: rows})
	if err != nil {
		return "", &Error{Code: TerminalUnavailable, Msg: "the terminal could not be started", Err: stripPath(err)}
	}
	term := &terminal{proc: proc, tty: tty, done: make(chan struct{})}
	t.terms[id] = term
	t.wg.Add(1)
	go func() { // owned by terminals: closeAll waits for it
		defer t.wg.Done()
		buf := make([]byte, 16<<10)
		for {
			n, err := tty.Read(buf)
			if n > 0 && output != nil {
				output(append([]byte(nil), buf[:n]...))
			}
			if err != nil {
				break
			}
		}
		st := proc.Wait()
		tty.Close()
		close(term.done)
		t.mu.Lock()
		if t.terms != nil {
			delete(t.terms, id)
		}
		t.mu.Unlock()
		if exit != nil {
			code := st.Code
			if st.Signal != 0 {
				code = -1
			}
			exit(code)
		}
	}()
	return id, nil
}

func (t *terminals) get(id string) (*terminal, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	term, ok := t.terms[id]
	if !ok {
		return nil, termError(TerminalNotFound, "no terminal "+id)
	}
	select {
	case <-term.done:
		return nil, termError(TerminalClosed, "terminal "+id+" has ended")
	default:
	}
	return term, nil
}

// WriteTerminal writes input to a terminal.
func (s *Session) WriteTerminal(id string, data []byte) error {
	term, err := s.terms.get(id)
	if err != nil {
		return err
	}
	if _, err := term.tty.Write(data); err != nil {
		return &Error{Code: TerminalClosed, Msg: "write to terminal " + id, Err: err}
	}
	return nil
}

// ResizeTerminal changes the size of a terminal.
func (s *Session) ResizeTerminal(id string, cols, rows uint16) error {
	term, err := s.terms.get(id)
	if err != nil {
		return err
	}
	if err := pty.Setsize(term.tty, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		return &Error{Code: TerminalClosed, Msg: "resize terminal " + id, Err: err}
	}
	return nil
}

// CloseTerminal ends a terminal's process; its exit is still reported.
func (s *Session) CloseTerminal(id string) error {
	term, err := s.terms.get(id)
	if err != nil {
		var te *Error
		if errors.As(err, &te) && te.Code == TerminalClosed {
			return nil
		}
		return err
	}
	term.proc.Signal(syscall.SIGHUP, false)
	term.proc.Signal(syscall.SIGKILL, false)
	return nil
}

func (t *terminals) closeAll() {
	t.mu.Lock()
	for _, term := range t.terms {
		term.proc.Signal(syscall.SIGKILL, false)
	}
	t.terms = nil
	t.mu.Unlock()
	t.wg.Wait()
}
