package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Sandbox is a running sandbox. Its methods are safe for concurrent use.
type Sandbox struct {
	m       *Manager
	name    string
	cmd     *exec.Cmd
	ctl     *conn
	ln      net.Listener
	cgroups []string
	pidFile string

	done chan struct{} // closed when init has exited and everything is torn down
	once sync.Once     // runs teardown

	mu      sync.Mutex // guards the fields below
	nextID  uint64
	pending map[uint64]chan msg // spawns waiting for "started"
	procs   map[int]*Process    // running processes by pid
	early   map[int]int         // exits that arrived before their "started"
	closed  bool
}

// Process is a process running in a sandbox.
type Process struct {
	sb     *Sandbox
	pid    int
	done   chan struct{}
	status ExitStatus
}

// Pid returns the process id inside the sandbox.
func (p *Process) Pid() int { return p.pid }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to end and returns how it ended. A process
// of a sandbox that was torn down ends as killed by SIGKILL.
func (p *Process) Wait() ExitStatus {
	<-p.done
	return p.status
}

// Signal sends sig to the process, or to its process group when group is
// set.
func (p *Process) Signal(sig syscall.Signal, group bool) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	return p.sb.ctl.send(msg{Op: opSignal, Pid: p.pid, Sig: int(sig), Group: group})
}

// Done is closed when the sandbox has ended (closed, or its init died).
func (sb *Sandbox) Done() <-chan struct{} { return sb.done }

// Spawn starts a process in the sandbox.
func (sb *Sandbox) Spawn(spec ProcSpec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Stdin == nil || spec.Stdout == nil || spec.Stderr == nil {
		return nil, errors.New("sandbox: a process needs argv, stdin, stdout and stderr")
	}
	flags := 0
	if spec.Setsid {
		flags |= flagSetsid
	}
	if spec.Setctty {
		flags |= flagSetctty
	}
	if spec.Setpgid {
		flags |= flagSetpgid
	}
	sb.mu.Lock()
	if sb.closed {
		sb.mu.Unlock()
		return nil, ErrClosed
	}
	sb.nextID++
	id := sb.nextID
	reply := make(chan msg, 1)
	sb.pending[id] = reply
	sb.mu.Unlock()
	m := msg{Op: opSpawn, ID: id, Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, Flags: flags}
	if err := sb.ctl.send(m, spec.Stdin, spec.Stdout, spec.Stderr); err != nil {
		sb.forget(id)
		return nil, fmt.Errorf("sandbox: %w", errors.Join(ErrClosed, err))
	}
	var r msg
	select {
	case r = <-reply:
	case <-sb.done:
		return nil, ErrClosed
	}
	if r.Err != "" {
		if r.Pid > 0 { // the launcher ran but could not execute the program
			sb.mu.Lock()
			delete(sb.early, r.Pid)
			sb.mu.Unlock()
		}
		return nil, errors.New(r.Err)
	}
	return sb.track(r.Pid), nil
}

func (sb *Sandbox) forget(id uint64) {
	sb.mu.Lock()
	delete(sb.pending, id)
	sb.mu.Unlock()
}

// track records a started process, or ends it at once when its exit
// already arrived.
func (sb *Sandbox) track(pid int) *Process {
	p := &Process{sb: sb, pid: pid, done: make(chan struct{})}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if ws, ok := sb.early[pid]; ok {
		delete(sb.early, pid)
		p.end(ws)
		return p
	}
	if sb.closed {
		p.status = ExitStatus{Code: 128 + int(syscall.SIGKILL), Signal: syscall.SIGKILL}
		close(p.done)
		return p
	}
	sb.procs[pid] = p
	return p
}

func (p *Process) end(status int) {
	ws := syscall.WaitStatus(status)
	switch {
	case ws.Signaled():
		p.status = ExitStatus{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	default:
		p.status = ExitStatus{Code: ws.ExitStatus()}
	}
	close(p.done)
}

// read dispatches init's messages until the control socket closes.
func (sb *Sandbox) read() {
	for {
		m, files, err := sb.ctl.recv()
		closeAll(files)
		if err != nil {
			sb.teardown()
			return
		}
		sb.mu.Lock()
		switch m.Op {
		case opStarted:
			if c := sb.pending[m.ID]; c != nil {
				delete(sb.pending, m.ID)
				c <- m
			}
		case opExit:
			if p := sb.procs[m.Pid]; p != nil {
				delete(sb.procs, m.Pid)
				p.end(m.Status)
			} else {
				sb.early[m.Pid] = m.Status
			}
		}
		sb.mu.Unlock()
	}
}

// Close tears the sandbox down: every process in it is killed, its
// cgroup removed, its proxy listener closed. It waits for all of that.
func (sb *Sandbox) Close() error {
	sb.kill()
	<-sb.done
	return nil
}

// kill has the starter end init; the kernel then kills everything in
// the sandbox's PID namespace, and the read loop, seeing the control
// socket close, tears the sandbox down.
func (sb *Sandbox) kill() {
	sb.cmd.Process.Signal(syscall.SIGTERM)
	sb.ctl.Close()
}

// wait waits for the starter, which exits once init and every process of
// the sandbox are gone. A starter that does not is killed, and init with
// it (its parent-death signal).
func (sb *Sandbox) wait() {
	t := time.AfterFunc(starterGrace, func() { sb.cmd.Process.Kill() })
	defer t.Stop()
	sb.cmd.Wait()
}

// starterGrace is how long the starter is given to end its sandbox.
const starterGrace = 5 * time.Second

// teardown runs once: it waits for init, marks every process killed and
// releases what the sandbox held.
func (sb *Sandbox) teardown() {
	sb.once.Do(func() {
		sb.kill()
		sb.wait()
		if sb.ln != nil {
			sb.ln.Close()
		}
		sb.mu.Lock()
		sb.closed = true
		for pid, p := range sb.procs {
			delete(sb.procs, pid)
			p.status = ExitStatus{Code: 128 + int(syscall.SIGKILL), Signal: syscall.SIGKILL}
			close(p.done)
		}
		sb.mu.Unlock()
		sb.m.release(sb)
		close(sb.done)
	})
}

// release forgets a torn-down sandbox and removes its cgroup and state.
func (m *Manager) release(sb *Sandbox) {
	m.mu.Lock()
	delete(m.live, sb)
	m.mu.Unlock()
	removeCgroups(sb.cgroups)
	if sb.pidFile != "" {
		os.Remove(sb.pidFile)
	}
}

// removeCgroups removes cgroup directories; their processes are gone once
// init has been reaped, but the kernel may take a moment to notice.
func removeCgroups(dirs []string) {
	for _, d := range dirs {
		for i := 0; i < 50; i++ {
			if err := os.Remove(d); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
