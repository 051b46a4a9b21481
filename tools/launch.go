package tools

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// A Launcher starts the processes of a workspace: bash, processes and
// terminals. The default launcher runs them on the host (confined by
// Landlock where the kernel has it); a sandbox runs them inside itself.
type Launcher interface {
	// Launch starts a process.
	Launch(spec LaunchSpec) (Proc, error)
	// WorkspaceDir is the absolute path at which launched processes see
	// the workspace.
	WorkspaceDir() string
	// Close ends every process the launcher started.
	Close() error
}

// A PathAliaser is a [Launcher] whose processes also see directories of
// the workspace at other absolute paths (through symbolic links); the
// file tools take paths under those too.
type PathAliaser interface {
	// PathAliases maps each such absolute path to the directory it
	// shows, relative to the workspace.
	PathAliases() map[string]string
}

// LaunchSpec describes a process to start.
type LaunchSpec struct {
	Argv []string
	// Dir is the working directory as the process sees it.
	Dir string
	// Env is the environment ("NAME=value") the workspace gives the
	// process; a launcher adds what its processes need (PATH, TMPDIR).
	Env []string
	// Stdin, Stdout and Stderr become the process's descriptors 0–2.
	Stdin, Stdout, Stderr *os.File
	// Setsid starts a new session, Setctty also makes Stdin its
	// controlling terminal; Setpgid starts a new process group.
	Setsid, Setctty, Setpgid bool
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code, or 128+Signal when a signal killed it.
	Code int
	// Signal is the signal that killed the process, or 0.
	Signal syscall.Signal
}

// Proc is a started process.
type Proc interface {
	// Pid is the process id, as the launcher's processes see it.
	Pid() int
	// Wait waits for the process to end.
	Wait() ExitStatus
	// Signal sends sig to the process, or to its process group.
	Signal(sig syscall.Signal, group bool) error
}

// hostLauncher runs processes on the host, confined by the workspace's
// Landlock ruleset when there is one.
type hostLauncher struct{ w *Workspace }

func (h hostLauncher) WorkspaceDir() string { return h.w.dir }

func (h hostLauncher) Close() error { return nil }

func (h hostLauncher) Launch(spec LaunchSpec) (Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("no program to run")
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	cmd.Env = append([]string{"PATH=" + path}, spec.Env...)
	if h.w.tmp != "" {
		cmd.Env = append(cmd.Env, "TMPDIR="+h.w.tmp)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: spec.Setsid, Setctty: spec.Setctty, Setpgid: spec.Setpgid && !spec.Setsid}
	if err := h.w.sandbox.start(cmd.Start); err != nil {
		return nil, err
	}
	p := &hostProc{cmd: cmd, done: make(chan struct{})}
	go p.wait() // owned by the process: ends when it does
	return p, nil
}

// hostProc is a process started by hostLauncher.
type hostProc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	status ExitStatus
}

func (p *hostProc) wait() {
	p.cmd.Wait()
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		p.status = ExitStatus{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	} else {
		p.status = ExitStatus{Code: ws.ExitStatus()}
	}
	close(p.done)
}

func (p *hostProc) Pid() int { return p.cmd.Process.Pid }

func (p *hostProc) Wait() ExitStatus {
	<-p.done
	return p.status
}

func (p *hostProc) Signal(sig syscall.Signal, group bool) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	if group {
		if err := syscall.Kill(-p.cmd.Process.Pid, sig); err == nil {
			return nil
		}
	}
	return p.cmd.Process.Signal(sig)
}

// devNull opens /dev/null for a process's unused descriptors.
func devNull() (*os.File, error) { return os.OpenFile(os.DevNull, os.O_RDWR, 0) }
