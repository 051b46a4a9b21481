package tools

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/creack/pty"
)

// Process states.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited"
	ProcessKilled  = "killed"
)

// ProcessSpec describes a process to start in the workspace.
type ProcessSpec struct {
	Argv []string
	// Cwd is relative to the workspace (default its root).
	Cwd string
	Env map[string]string
	// PTY, when set, runs the process on a pseudo-terminal of that size.
	PTY *PTYSize
}

// PTYSize is the size of a pseudo-terminal.
type PTYSize struct{ Cols, Rows uint16 }

// ProcessExit reports how a process ended.
type ProcessExit struct {
	ProcessID string
	State     string
	ExitCode  int
	Reason    string
}

// ProcessInfo describes a started process.
type ProcessInfo struct {
	ProcessID string
	PID       int
	State     string
}

const maxProcesses = 64

type process struct {
	spec  ProcessSpec
	proc  Proc
	tty   *os.File
	state string
	done  chan struct{}
}

type processes struct {
	w *Workspace

	// mu guards the fields below and each process's state; wg is added to
	// under it, so that closing waits for every process's goroutines.
	mu    sync.Mutex
	procs map[string]*process
	wg    sync.WaitGroup
}

func (p *processes) init(w *Workspace) {
	p.w = w
	p.procs = make(map[string]*process)
}

func sameSpec(a, b ProcessSpec) bool {
	if !slices.Equal(a.Argv, b.Argv) || a.Cwd != b.Cwd || !maps.Equal(a.Env, b.Env) {
		return false
	}
	if (a.PTY == nil) != (b.PTY == nil) {
		return false
	}
	return a.PTY == nil || *a.PTY == *b.PTY
}

// StartProcess starts a process, idempotently by id: the same id with the
// same spec returns the existing process; with another spec it fails with
// code "process_id_spec_mismatch". A failed exec has code "spawn_failed".
// onExit, if not nil, is called once when the process ends.
func (s *Session) StartProcess(id string, spec ProcessSpec, onExit func(ProcessExit)) (ProcessInfo, error) {
	return s.procs.start(id, spec, onExit)
}

func (p *processes) start(id string, spec ProcessSpec, onExit func(ProcessExit)) (ProcessInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id == "" || len(spec.Argv) == 0 {
		return ProcessInfo{}, errorf(CodeInvalidInput, "process_id and argv are required")
	}
	if old, ok := p.procs[id]; ok {
		if !sameSpec(old.spec, spec) {
			return ProcessInfo{}, errorf(CodeSpecMismatch, "process %s exists with another spec", id)
		}
		return ProcessInfo{ProcessID: id, PID: old.proc.Pid(), State: old.state}, nil
	}
	if p.procs == nil {
		return ProcessInfo{}, errorf(CodeCanceled, "the session was closed")
	}
	if len(p.procs) >= maxProcesses {
		return ProcessInfo{}, errorf(CodeSpawnFailed, "at most %d processes per session", maxProcesses)
	}
	cwd, err := p.w.rel(spec.Cwd)
	if err != nil {
		return ProcessInfo{}, err
	}
	if fi, err := p.w.root.Stat(cwd); err != nil || !fi.IsDir() {
		return ProcessInfo{}, errorf(CodeSpawnFailed, "cwd %q is not a directory of the workspace", spec.Cwd)
	}
	env := p.w.env()
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	pr := &process{spec: spec, state: ProcessRunning, done: make(chan struct{})}
	proc, tty, err := p.w.launchProc(LaunchSpec{Argv: spec.Argv, Dir: p.w.procDir(cwd), Env: env}, spec.PTY)
	if err != nil {
		return ProcessInfo{}, &Error{Code: CodeSpawnFailed, Msg: "exec " + strings.Join(spec.Argv, " ") + " failed", Err: stripPath(err)}
	}
	pr.proc, pr.tty = proc, tty
	p.procs[id] = pr
	if pr.tty != nil {
		p.wg.Add(1)
		go func() { // owned by processes: ends when the terminal closes
			defer p.wg.Done()
			io.Copy(io.Discard, pr.tty)
		}()
	}
	p.wg.Add(1)
	go func() { // owned by processes: killAll waits for it
		defer p.wg.Done()
		st := proc.Wait()
		if pr.tty != nil {
			pr.tty.Close()
		}
		exit := ProcessExit{ProcessID: id, State: ProcessExited, ExitCode: st.Code}
		if st.Signal != 0 {
			exit.State, exit.Reason = ProcessKilled, st.Signal.String()
		}
		p.mu.Lock()
		pr.state = exit.State
		p.mu.Unlock()
		close(pr.done)
		if onExit != nil {
			onExit(exit)
		}
	}()
	return ProcessInfo{ProcessID: id, PID: proc.Pid(), State: ProcessRunning}, nil
}

var signals = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL, "SIGINT": syscall.SIGINT,
	"SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2, "SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT,
}

// SignalProcess sends a signal ("SIGTERM", "TERM", …) to a process and its
// group and returns the process state.
func (s *Session) SignalProcess(id, signal string) (string, error) {
	p := &s.procs
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.procs[id]
	if !ok {
		return "", errorf(CodeNotFound, "no process %s", id)
	}
	name := strings.ToUpper(signal)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig, ok := signals[name]
	if !ok {
		return "", errorf(CodeInvalidInput, "unknown signal %q", signal)
	}
	if pr.state == ProcessRunning {
		pr.proc.Signal(sig, true)
	}
	return pr.state, nil
}

func (p *processes) killAll() {
	p.mu.Lock()
	for _, pr := range p.procs {
		if pr.state == ProcessRunning {
			pr.proc.Signal(syscall.SIGKILL, true)
		}
	}
	p.procs = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// String describes the exit for logs.
func (e ProcessExit) String() string {
	return fmt.Sprintf("process %s %s (exit %d)", e.ProcessID, e.State, e.ExitCode)
}

// launchProc starts a process with /dev/null as its descriptors, or on a
// new pseudo-terminal of the given size (returned: its controlling side).
func (w *Workspace) launchProc(spec LaunchSpec, size *PTYSize) (Proc, *os.File, error) {
	if size == nil {
		null, err := devNull()
		if err != nil {
			return nil, nil, err
		}
		defer null.Close()
		spec.Stdin, spec.Stdout, spec.Stderr, spec.Setpgid = null, null, null, true
		proc, err := w.launch.Launch(spec)
		return proc, nil, err
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: size.Cols, Rows: size.Rows}); err != nil {
		ptmx.Close()
		return nil, nil, err
	}
	spec.Stdin, spec.Stdout, spec.Stderr, spec.Setsid, spec.Setctty = tty, tty, tty, true, true
	proc, err := w.launch.Launch(spec)
	if err != nil {
		ptmx.Close()
		return nil, nil, err
	}
	return proc, ptmx, nil
}
