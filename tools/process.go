package tools

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
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
	cmd   *exec.Cmd
	tty   *os.File
	state string
	done  chan struct{}
}

type processes struct {
	w     *Workspace
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
		return ProcessInfo{ProcessID: id, PID: old.cmd.Process.Pid, State: old.state}, nil
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
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = p.w.dir + "/" + cwd
	cmd.Env = p.w.env()
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		cmd.Env = append(cmd.Env, k+"="+spec.Env[k])
	}
	pr := &process{spec: spec, cmd: cmd, state: ProcessRunning, done: make(chan struct{})}
	var startErr error
	if spec.PTY != nil {
		startErr = p.w.sandbox.start(func() error {
			f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: spec.PTY.Cols, Rows: spec.PTY.Rows})
			pr.tty = f
			return err
		})
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		startErr = p.w.sandbox.start(cmd.Start)
	}
	if startErr != nil {
		return ProcessInfo{}, &Error{Code: CodeSpawnFailed, Msg: "exec " + strings.Join(spec.Argv, " ") + " failed", Err: stripPath(startErr)}
	}
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
		err := cmd.Wait()
		if pr.tty != nil {
			pr.tty.Close()
		}
		exit := ProcessExit{ProcessID: id, State: ProcessExited, ExitCode: cmd.ProcessState.ExitCode()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				exit.State, exit.Reason, exit.ExitCode = ProcessKilled, ws.Signal().String(), 128+int(ws.Signal())
			}
		}
		p.mu.Lock()
		pr.state = exit.State
		p.mu.Unlock()
		close(pr.done)
		if onExit != nil {
			onExit(exit)
		}
	}()
	return ProcessInfo{ProcessID: id, PID: cmd.Process.Pid, State: ProcessRunning}, nil
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
		if err := syscall.Kill(-pr.cmd.Process.Pid, sig); err != nil {
			pr.cmd.Process.Signal(sig)
		}
	}
	return pr.state, nil
}

func (p *processes) killAll() {
	p.mu.Lock()
	for _, pr := range p.procs {
		if pr.state == ProcessRunning {
			if syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL) != nil {
				pr.cmd.Process.Kill()
			}
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
