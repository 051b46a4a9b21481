//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
)

// Manager reports that sandboxes are unavailable.
type Manager struct{ cfg Config }

// NewManager returns a manager whose sandboxes cannot start.
func NewManager(cfg Config) (*Manager, error) { return &Manager{cfg: cfg}, nil }

func (m *Manager) unavailable() error {
	return fmt.Errorf("%w: reins sandboxes need Linux namespaces (this is %s)", ErrUnavailable, runtime.GOOS)
}

// Check reports that sandboxes are unavailable.
func (m *Manager) Check(context.Context) (time.Duration, error) { return 0, m.unavailable() }

// Start reports that sandboxes are unavailable.
func (m *Manager) Start(context.Context, Options) (*Sandbox, error) { return nil, m.unavailable() }

// Limits reports the configured limits.
func (m *Manager) Limits() (Limits, string) { return m.cfg.Limits, "none" }

// Uid returns the server's own ids.
func (m *Manager) Uid() (int, int) { return os.Geteuid(), os.Getegid() }

// Close does nothing.
func (m *Manager) Close() error { return nil }

// Sandbox is never made on this system.
type Sandbox struct{}

// Spawn reports that the sandbox has ended.
func (*Sandbox) Spawn(ProcSpec) (*Process, error) { return nil, ErrClosed }

// Close does nothing.
func (*Sandbox) Close() error { return nil }

// Done is closed.
func (*Sandbox) Done() <-chan struct{} { c := make(chan struct{}); close(c); return c }

// Process is never started on this system.
type Process struct{}

// Pid returns 0.
func (*Process) Pid() int { return 0 }

// Wait returns at once.
func (*Process) Wait() ExitStatus { return ExitStatus{} }

// Done is closed.
func (*Process) Done() <-chan struct{} { c := make(chan struct{}); close(c); return c }

// Signal reports that the process is done.
func (*Process) Signal(syscall.Signal, bool) error { return os.ErrProcessDone }
