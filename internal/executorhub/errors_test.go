package executorhub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/executor"
)

type blockingProcesses struct{ *testSession }

func (b blockingProcesses) StartProcess(ctx context.Context, p executor.ProcessStart, onExit func(executor.ProcessExit)) (executor.ProcessInfo, error) {
	<-ctx.Done()
	return executor.ProcessInfo{}, ctx.Err()
}

func (b blockingProcesses) SignalProcess(ctx context.Context, p executor.ProcessSignal) (executor.ProcessState, error) {
	return executor.ProcessState{}, nil
}

type blockingOpener struct{}

func (blockingOpener) OpenSession(context.Context, executor.Assignment) (executor.Session, error) {
	return blockingProcesses{&testSession{s: &testSessions{}}}, nil
}

func TestRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{RequestTimeout: 5 * time.Second})
		c := f.client(executor.Options{Sessions: blockingOpener{}, Capabilities: append([]string{executor.CapabilityProcess}, testCaps...)})
		l := f.assign("s1", "noop")
		start := time.Now()
		err := l.Call(context.Background(), executor.MethodProcessStart, executor.ProcessStart{SessionID: "s1", ProcessID: "p", Spec: executor.ProcessSpec{Argv: []string{"x"}}}, nil)
		var te *executor.RequestTimeoutError
		if !errors.As(err, &te) || te.Method != executor.MethodProcessStart || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Call = %v, want executor.RequestTimeoutError", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("timed out after %s", d)
		}
		f.shutdown(c)
	})
}
