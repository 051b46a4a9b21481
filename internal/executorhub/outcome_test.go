package executorhub

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

// pendingCall starts a blocking tool call and returns where its error lands.
func pendingCall(t *testing.T, l *Lease, id string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := l.CallTool(context.Background(), tool.Call{ID: id, Name: "block"})
		errc <- err
	}()
	return errc
}

func wantOutcomeUnknown(t *testing.T, errc <-chan error) {
	t.Helper()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrToolOutcomeUnknown) {
			t.Fatalf("CallTool = %v, want ErrToolOutcomeUnknown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pending call did not end")
	}
}

func TestOutcomeUnknownCauses(t *testing.T) {
	t.Run("restarted executor no longer reports the session", func(t *testing.T) {
		f := newFixture(t, HubOptions{})
		ts := &testSessions{gate: make(chan struct{})}
		defer close(ts.gate)
		first := f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		l := f.assign("s1", "block")
		errc := pendingCall(t, l, "c1")
		waitFor(t, func() bool { return ts.runs.Load() == 1 })
		// The same executor identity comes back without the session.
		f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps})
		wantOutcomeUnknown(t, errc)
		if err := waitErr(t, first); !errors.Is(err, executor.ErrReplaced) {
			t.Fatalf("old connection: %v", err)
		}
	})
	t.Run("executor closed", func(t *testing.T) {
		f := newFixture(t, HubOptions{})
		ts := &testSessions{gate: make(chan struct{})}
		defer close(ts.gate)
		c := f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		l := f.assign("s1", "block")
		errc := pendingCall(t, l, "c1")
		waitFor(t, func() bool { return ts.runs.Load() == 1 })
		c.Stop()
		wantOutcomeUnknown(t, errc)
	})
	t.Run("session ended", func(t *testing.T) {
		f := newFixture(t, HubOptions{})
		ts := &testSessions{gate: make(chan struct{})}
		defer close(ts.gate)
		f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		l := f.assign("s1", "block")
		errc := pendingCall(t, l, "c1")
		waitFor(t, func() bool { return ts.runs.Load() == 1 })
		l.Release(context.Background())
		wantOutcomeUnknown(t, errc)
		if _, err := l.CallTool(context.Background(), tool.Call{ID: "c2", Name: "noop"}); !errors.Is(err, executor.ErrSessionEnded) {
			t.Fatalf("after release: %v", err)
		}
	})
}
