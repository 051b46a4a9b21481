package cobra

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/reinsdev/reins/mcp"
)

// Status is a snapshot of a binding's executions.
type Status struct {
	// Slots is the number of execution slots; InUse how many are taken,
	// including slots held by leaked process groups.
	Slots, InUse int
	// Running lists the commands in progress.
	Running []Running
	// Leaked lists process groups that could not be confirmed stopped.
	Leaked []Leak
	// Degraded is true when a process group leaked.
	Degraded bool
	// LastCleanupError describes the most recent cleanup failure.
	LastCleanupError string
	// ShuttingDown is true once Shutdown was called.
	ShuttingDown bool
}

// Running describes one command in progress.
type Running struct {
	Operation string
	PID       int
	Started   time.Time
}

// A Leak is a process group that outlived its cleanup budget; it keeps its
// execution slot.
type Leak struct {
	Operation string
	PGID      int
	Since     time.Time
}

// Status reports the binding's slots, running commands and leaks.
func (b *Binding) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Status{Slots: cap(b.slots), InUse: len(b.slots), Leaked: append([]Leak(nil), b.leaked...),
		Degraded: len(b.leaked) > 0, LastCleanupError: b.lastErr, ShuttingDown: b.closing}
	for ex := range b.running {
		s.Running = append(s.Running, Running{Operation: ex.op, PID: ex.pid, Started: ex.started})
	}
	return s
}

// Shutdown refuses new calls (they answer unavailable), stops the
// commands in progress (they answer cancelled) and waits for them and for
// any leaked process group until ctx is done, when it returns a
// [*mcp.Failure] with [mcp.CodeCleanupFailed].
func (b *Binding) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.closing = true
	for ex := range b.running {
		ex.cancel(errShutdown)
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.finished.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return mcp.NewFailure(mcp.CodeCleanupFailed, "the binding's shutdown ran out of budget", context.Cause(ctx))
	}
	b.mu.Lock()
	leaked := append([]Leak(nil), b.leaked...)
	b.mu.Unlock()
	for _, l := range leaked {
		_ = b.opts.signal(l.PGID, syscall.SIGKILL)
	}
	for _, l := range leaked {
		for groupAlive(l.PGID) {
			select {
			case <-ctx.Done():
				return mcp.NewFailure(mcp.CodeCleanupFailed, "the binding's shutdown ran out of budget",
					fmt.Errorf("process group %d of %s still alive", l.PGID, l.Operation))
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}
