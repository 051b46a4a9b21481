package sandbox

import (
	"context"
	"sync"
	"syscall"

	"github.com/reinsdev/reins/tools"
)

// Launcher runs a workspace's processes (see [tools.Launcher]) in a
// sandbox that it starts on the first launch, so that nothing waits for a
// sandbox until a tool needs one, and starts again if it has ended.
type Launcher struct {
	m    *Manager
	opts Options

	mu     sync.Mutex // guards the fields below
	sb     *Sandbox
	closed bool
}

// Launcher returns a launcher whose processes run in a sandbox made with
// o.
func (m *Manager) Launcher(o Options) *Launcher { return &Launcher{m: m, opts: o} }

// WorkspaceDir implements [tools.Launcher].
func (l *Launcher) WorkspaceDir() string { return WorkspaceDir }

// PathAliases implements [tools.PathAliaser]: [SessionOutputs] shows the
// workspace's outputs directory.
func (l *Launcher) PathAliases() map[string]string { return PathAliases() }

// PathAliases maps the absolute paths at which a sandbox also shows
// directories of its workspace to those directories.
func PathAliases() map[string]string { return map[string]string{SessionOutputs: OutputsDir} }

// Launch implements [tools.Launcher].
func (l *Launcher) Launch(spec tools.LaunchSpec) (tools.Proc, error) {
	sb, err := l.sandbox()
	if err != nil {
		return nil, err
	}
	p, err := sb.Spawn(ProcSpec{Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, Stdin: spec.Stdin,
		Stdout: spec.Stdout, Stderr: spec.Stderr, Setsid: spec.Setsid, Setctty: spec.Setctty, Setpgid: spec.Setpgid})
	if err != nil {
		return nil, err
	}
	return proc{p}, nil
}

// sandbox returns the running sandbox, starting one if there is none.
func (l *Launcher) sandbox() (*Sandbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.sb != nil {
		select {
		case <-l.sb.Done():
		default:
			return l.sb, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	sb, err := l.m.Start(ctx, l.opts)
	if err != nil {
		return nil, err
	}
	l.sb = sb
	return sb, nil
}

// Started reports whether the launcher's sandbox is running.
func (l *Launcher) Started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sb == nil {
		return false
	}
	select {
	case <-l.sb.Done():
		return false
	default:
		return true
	}
}

// Close implements [tools.Launcher]: it tears the sandbox down with
// everything in it.
func (l *Launcher) Close() error {
	l.mu.Lock()
	sb := l.sb
	l.sb, l.closed = nil, true
	l.mu.Unlock()
	if sb != nil {
		return sb.Close()
	}
	return nil
}

// proc adapts a Process to tools.Proc.
type proc struct{ p *Process }

func (p proc) Pid() int { return p.p.Pid() }

func (p proc) Wait() tools.ExitStatus {
	st := p.p.Wait()
	return tools.ExitStatus{Code: st.Code, Signal: st.Signal}
}

func (p proc) Signal(sig syscall.Signal, group bool) error { return p.p.Signal(sig, group) }

var _ tools.Launcher = (*Launcher)(nil)
