package cobra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/reinsdev/reins/mcp"
)

// errShutdown is the cancellation cause when the host shuts the binding
// down.
var errShutdown = errors.New("mcpcobra: binding shut down")

// execution is one running command.
type execution struct {
	op      string
	pid     int
	started time.Time
	cancel  context.CancelCauseFunc
}

// execute runs the binary with args in one of slots and reports its
// outcome.
func (b *Binding) execute(ctx context.Context, op string, args []string, slots chan struct{}) (*mcp.Result, error) {
	b.mu.Lock()
	closing := b.closing
	b.mu.Unlock()
	if closing {
		return nil, mcp.NewFailure(mcp.CodeUnavailable, "the binding is shutting down", nil)
	}
	select {
	case slots <- struct{}{}:
	default:
		return nil, mcp.NewFailure(mcp.CodeBusy, "every execution slot is taken; retry later", nil)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ex := &execution{op: op, started: time.Now(), cancel: cancel}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		<-slots
		return nil, mcp.NewFailure(mcp.CodeUnavailable, "the binding is shutting down", nil)
	}
	b.running[ex] = struct{}{}
	b.finished.Add(1)
	b.mu.Unlock()
	keepSlot := false
	defer func() {
		b.mu.Lock()
		delete(b.running, ex)
		b.mu.Unlock()
		if !keepSlot {
			<-slots
		}
		b.finished.Done()
	}()

	res, leaked, err := b.run(ctx, ex, args)
	if leaked {
		keepSlot = true
	}
	return res, err
}

// run starts the child and supervises it to the end. leaked reports that
// the process group could not be confirmed gone.
func (b *Binding) run(ctx context.Context, ex *execution, args []string) (*mcp.Result, bool, error) {
	c, err := b.start(ex, args)
	if err != nil {
		return nil, false, mcp.NewFailure(mcp.CodeUnavailable, "the command could not be started", err)
	}
	stopped, gone := b.supervise(ctx, c)
	exit := -1
	if gone.waited && c.cmd.ProcessState != nil {
		exit = c.cmd.ProcessState.ExitCode()
	}
	out, outTrunc := c.stdout.String()
	errs, errTrunc := c.stderr.String()
	details := map[string]any{"stdout": out, "stderr": errs, "exitCode": exit, "truncated": outTrunc || errTrunc}
	if !gone.drained || !gone.waited {
		b.recordLeak(ex.op, c.pgid)
		return nil, true, mcp.NewFailure(mcp.CodeCleanupFailed,
			"the command's processes could not be confirmed stopped; its execution slot stays taken", nil).WithDetails(details)
	}
	if stopped {
		return nil, false, b.stoppedError(ctx, details)
	}
	if exit != 0 {
		return nil, false, mcp.NewFailure(mcp.CodeCommandFailed, failedMessage(exit, errs), nil).WithDetails(details)
	}
	return mcp.StructuredResult(details), false, nil
}

// child is a started command: its process group and the copies of its
// output into bounded captures.
type child struct {
	cmd            *exec.Cmd
	pgid           int
	outR, errR     *os.File
	stdout, stderr *capture
	copies         sync.WaitGroup
	waited         chan error // the leader's Wait, once
}

// start starts the command in a process group of its own, stdin closed,
// its output copied into captures bounded by OutputCap, and records its
// process group on the execution.
func (b *Binding) start(ex *execution, args []string) (*child, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(b.exe, args...)
	cmd.Env = b.opts.Env
	cmd.Dir = b.opts.Dir
	cmd.Stdin = nil // the null device: stdin is closed to the child
	cmd.Stdout, cmd.Stderr = outW, errW
	ownGroup(cmd)
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	c := &child{cmd: cmd, pgid: cmd.Process.Pid, outR: outR, errR: errR,
		stdout: newCapture(b.opts.OutputCap), stderr: newCapture(b.opts.OutputCap), waited: make(chan error, 1)}
	b.mu.Lock()
	ex.pid = c.pgid
	b.mu.Unlock()
	c.copies.Go(func() { _, _ = io.Copy(c.stdout, outR); outR.Close() })
	c.copies.Go(func() { _, _ = io.Copy(c.stderr, errR); errR.Close() })
	go func() { c.waited <- cmd.Wait() }()
	return c, nil
}

// cleanup says whether a child is confirmed gone: its leader waited for
// and its process group drained.
type cleanup struct{ waited, drained bool }

// supervise waits for the child until its timeout or ctx ends it
// (stopped), then stops whatever the leader left behind in its group.
func (b *Binding) supervise(ctx context.Context, c *child) (stopped bool, gone cleanup) {
	tctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	gone.waited = true
	select {
	case <-c.waited:
	case <-tctx.Done():
		stopped = true
		gone.waited = b.stop(c.pgid, c.waited)
	}
	gone.drained = b.drain(c.pgid)
	if gone.drained {
		c.copies.Wait()
	} else {
		c.outR.Close()
		c.errR.Close()
	}
	return stopped, gone
}

// recordLeak keeps a process group that could not be confirmed stopped,
// for the binding's status, and logs it.
func (b *Binding) recordLeak(op string, pgid int) {
	b.mu.Lock()
	b.leaked = append(b.leaked, Leak{Operation: op, PGID: pgid, Since: time.Now()})
	b.lastErr = fmt.Sprintf("%s: process group %d not confirmed stopped within %s", op, pgid, b.opts.CleanupBudget)
	b.mu.Unlock()
	b.log.Error("mcpcobra: cleanup failed", "operation", op, "pgid", pgid)
}

// stoppedError says why a command was stopped: the host's shutdown, the
// caller's cancellation or its execution timeout.
func (b *Binding) stoppedError(ctx context.Context, details map[string]any) error {
	switch {
	case errors.Is(context.Cause(ctx), errShutdown):
		return mcp.NewFailure(mcp.CodeCancelled, "the host shut the binding down while the command ran", nil)
	case ctx.Err() != nil:
		return fmt.Errorf("command stopped: %w", ctx.Err())
	}
	return mcp.NewFailure(mcp.CodeTimeout,
		fmt.Sprintf("the command ran past its %s execution timeout and was stopped", b.opts.Timeout), nil).WithDetails(details)
}

// failedMessage names the exit status and the last line of stderr.
func failedMessage(exit int, stderr string) string {
	msg := fmt.Sprintf("the command exited with status %d", exit)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		if len(last) > 300 {
			last = last[:300] + "…"
		}
		msg += ": " + strings.ToValidUTF8(last, "?")
	}
	return msg
}

// stop ends a running leader: SIGTERM to the group, SIGKILL after the
// grace period, then up to the cleanup budget for the leader to be
// waited on. It reports whether the leader was waited on.
func (b *Binding) stop(pgid int, waited <-chan error) bool {
	_ = b.opts.signal(pgid, syscall.SIGTERM)
	grace := time.NewTimer(b.opts.TermGrace)
	defer grace.Stop()
	select {
	case <-waited:
		return true
	case <-grace.C:
	}
	_ = b.opts.signal(pgid, syscall.SIGKILL)
	budget := time.NewTimer(b.opts.CleanupBudget)
	defer budget.Stop()
	select {
	case <-waited:
		return true
	case <-budget.C:
		return false
	}
}

// drain stops what is left of the process group after its leader and
// reports whether the group was confirmed empty within the budget.
func (b *Binding) drain(pgid int) bool {
	if !groupAlive(pgid) {
		return true
	}
	_ = b.opts.signal(pgid, syscall.SIGTERM)
	if waitGroupGone(pgid, b.opts.TermGrace) {
		return true
	}
	_ = b.opts.signal(pgid, syscall.SIGKILL)
	return waitGroupGone(pgid, b.opts.CleanupBudget)
}

// waitGroupGone polls until the group is empty or d passes.
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
