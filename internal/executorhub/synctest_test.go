package executorhub

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

func TestTokenExpiryRefreshesAndResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{TokenTTL: time.Minute})
		var registered atomic.Int32
		ts := &testSessions{}
		c := f.client(executor.Options{Sessions: ts, Capabilities: testCaps, OnEvent: func(e executor.Event) {
			if e.Type == executor.EventRegistered {
				registered.Add(1)
			}
		}})
		defer f.shutdown(c)
		l := f.assign("s1", "noop")
		time.Sleep(150 * time.Second) // two token expiries (4001) and many heartbeats
		synctest.Wait()
		if n := registered.Load(); n < 3 {
			t.Fatalf("registered %d times, want at least 3 (initial and after each 4001)", n)
		}
		if err := l.Err(); err != nil {
			t.Fatalf("lease ended across token refreshes: %v", err)
		}
		res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "noop"})
		if err != nil || res.Content[0].Text != "ok noop" {
			t.Fatalf("CallTool after resume: %v %+v", err, res)
		}
		if ts.opened != 1 {
			t.Fatalf("session opened %d times, want 1 (resumed, not reassigned)", ts.opened)
		}
	})
}

func TestLeaseExpiryExecutorLostMidTool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{LeaseTTL: 30 * time.Second, HeartbeatInterval: 10 * time.Second})
		ts := &testSessions{gate: make(chan struct{})}
		a := f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		l := f.assign("s1", "block")
		start := time.Now()
		errc := make(chan error, 1)
		go func() {
			_, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "block"})
			errc <- err
		}()
		synctest.Wait()
		// The executor's machine is gone: its socket drops and it never
		// comes back (like SIGKILL).
		f.net.setRefuse(true)
		f.net.drop()
		err := <-errc
		if !errors.Is(err, ErrToolOutcomeUnknown) {
			t.Fatalf("CallTool = %v, want ErrToolOutcomeUnknown", err)
		}
		if d := time.Since(start); d > 30*time.Second+time.Second {
			t.Fatalf("outcome unknown after %s, want within the lease TTL", d)
		}
		if !errors.Is(l.Err(), ErrToolOutcomeUnknown) {
			t.Fatalf("lease Err = %v", l.Err())
		}
		// The session continues on another executor.
		f.net.setRefuse(false)
		ts2 := &testSessions{}
		b := f.client(executor.Options{Sessions: ts2, Capabilities: testCaps, Executor: executor.ExecutorInfo{Name: "exec-b"}})
		l2 := f.assign("s1", "block", "noop")
		if l2.ExecutorID == l.ExecutorID {
			t.Fatalf("placed on the lost executor again")
		}
		res, err := l2.CallTool(context.Background(), tool.Call{ID: "c2", Name: "noop"})
		if err != nil || res.IsError {
			t.Fatalf("CallTool on the new executor: %v %+v", err, res)
		}
		close(ts.gate)
		f.shutdown(a, b)
	})
}

func TestSocketDroppedMidToolResultOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{})
		ts := &testSessions{gate: make(chan struct{})}
		c, registered := f.countingClient(ts)
		defer f.shutdown(c)
		l := f.assign("s1", "block")
		type out struct {
			res tool.Result
			err error
		}
		outc := make(chan out, 1)
		go func() {
			res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "block"})
			outc <- out{res, err}
		}()
		synctest.Wait()
		f.net.drop() // the socket drops while the tool runs
		synctest.Wait()
		close(ts.gate) // the tool finishes while disconnected (or just after)
		o := <-outc
		if o.err != nil || o.res.Content[0].Text != "ok block" {
			t.Fatalf("CallTool = %+v, %v", o.res, o.err)
		}
		if n := registered.Load(); n < 2 {
			t.Fatalf("registered %d times; the client did not reconnect", n)
		}
		if n := ts.runs.Load(); n != 1 {
			t.Fatalf("tool ran %d times, want 1", n)
		}
		// A resend of the same result is acknowledged as a duplicate.
		var ack executor.ToolResultAck
		if err := c.Call(context.Background(), executor.MethodToolResult, executor.ToolResultParams{SessionID: "s1", ToolCallID: "c1",
			ToolResult: executor.ToolResult{Content: []executor.ContentBlock{executor.TextBlock("again")}}}, &ack); err != nil || !ack.Duplicate {
			t.Fatalf("resend: %v %+v", err, ack)
		}
		res, _ := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "block"})
		if res.Content[0].Text != "ok block" {
			t.Fatalf("second collection = %+v", res)
		}
	})
}

func TestMaxReconnectAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{})
		f.net.setRefuse(true)
		var attempts atomic.Int32
		start := time.Now()
		c := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps, MaxReconnectAttempts: 4,
			BackoffMin: time.Second, BackoffMax: 4 * time.Second,
			OnEvent: func(e executor.Event) {
				if e.Type == executor.EventConnecting {
					attempts.Add(1)
				}
			}})
		<-c.Done()
		err := c.Err()
		if !errors.Is(err, executor.ErrReconnectExhausted) || !errors.Is(err, errRefused) {
			t.Fatalf("Err = %v, want executor.ErrReconnectExhausted wrapping the last failure", err)
		}
		if n := attempts.Load(); n != 5 {
			t.Fatalf("%d attempts, want 1 + 4 reconnects", n)
		}
		// Full jitter: each wait is in [0, min(4s, 1s·2^(n-1))].
		if d := time.Since(start); d > (1+2+4+4)*time.Second {
			t.Fatalf("backoff took %s, over its bound", d)
		}
		if err := c.Call(context.Background(), executor.MethodHeartbeat, executor.HeartbeatParams{}, nil); !errors.Is(err, executor.ErrClientStopped) {
			t.Fatalf("Call after the end = %v, want executor.ErrClientStopped", err)
		}
		f.shutdown()
	})
}

func TestHeartbeatsKeepLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{LeaseTTL: 30 * time.Second, HeartbeatInterval: 10 * time.Second})
		c := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps})
		l := f.assign("s1", "noop")
		time.Sleep(10 * time.Minute)
		if err := l.Err(); err != nil {
			t.Fatalf("lease ended despite heartbeats: %v", err)
		}
		// Without heartbeats (executor unreachable) it expires within TTL.
		f.net.setRefuse(true)
		f.net.drop()
		start := time.Now()
		<-l.Done()
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("lease expired after %s", d)
		}
		f.net.setRefuse(false)
		f.shutdown(c)
	})
}

func TestWaitAssignStartsWhenAnExecutorRegisters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{})
		got := make(chan *Lease, 1)
		go func() {
			l, err := f.hub.WaitAssign(context.Background(), AssignRequest{EnvironmentID: "env_1", SessionID: "s1", Tools: []string{"noop"}})
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		time.Sleep(time.Hour) // no executor: the session waits
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("assigned without an executor")
		default:
		}
		c := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps})
		l := <-got
		if l == nil || l.SessionID != "s1" {
			t.Fatalf("lease = %+v", l)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := f.hub.WaitAssign(ctx, AssignRequest{EnvironmentID: "env_other", SessionID: "s2"}); !errors.Is(err, ErrNoExecutor) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitAssign without executor = %v", err)
		}
		f.shutdown(c)
	})
}

func TestRunToolPlacesAndReplaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{})
		ts := &testSessions{gate: make(chan struct{})}
		a := f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		req := AssignRequest{EnvironmentID: "env_1", SessionID: "s1", Tools: []string{"noop", "block"}}
		ctx := context.Background()
		res, err := f.hub.RunTool(ctx, req, tool.Call{ID: "c1", Name: "noop"})
		if err != nil || res.Content[0].Text != "ok noop" {
			t.Fatalf("first call: %v %+v", err, res)
		}
		// The executor is lost mid-call: the model gets the outcome-unknown result.
		done := make(chan tool.Result, 1)
		go func() {
			res, err := f.hub.RunTool(ctx, req, tool.Call{ID: "c2", Name: "block"})
			if !errors.Is(err, ErrToolOutcomeUnknown) {
				t.Errorf("lost call: %v", err)
			}
			done <- res
		}()
		synctest.Wait()
		f.net.setRefuse(true)
		f.net.drop()
		if res := <-done; res.ErrorCode != "tool_outcome_unknown" || res.Content[0].Text != OutcomeUnknownText {
			t.Fatalf("lost call result: %+v", res)
		}
		// The next call waits for an executor and runs there.
		f.net.setRefuse(false)
		b := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps, Executor: executor.ExecutorInfo{Name: "exec-b"}})
		res, err = f.hub.RunTool(ctx, req, tool.Call{ID: "c3", Name: "noop"})
		if err != nil || res.IsError {
			t.Fatalf("after the loss: %v %+v", err, res)
		}
		if err := f.hub.EndSession(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		close(ts.gate)
		f.shutdown(a, b)
	})
}

// countingClient is a client of the fixture serving ts, reconnecting
// within 1 to 2 s, that counts its registrations.
func (f *memFixture) countingClient(ts *testSessions) (*executor.Client, *atomic.Int32) {
	registered := new(atomic.Int32)
	c := f.client(executor.Options{Sessions: ts, Capabilities: testCaps, BackoffMin: time.Second, BackoffMax: 2 * time.Second,
		OnEvent: func(e executor.Event) {
			if e.Type == executor.EventRegistered {
				registered.Add(1)
			}
		}})
	return c, registered
}

// TestSilentExecutorLosesItsLeaseAtOnce cuts the network between the hub
// and an executor without closing anything (both ends stay open, nothing
// passes) while a tool runs: the hub's ping goes unanswered, so within a
// ping interval and its deadline (10 s + 5 s) the connection is closed and
// the lease lost, the tool call ending with ErrToolOutcomeUnknown, long
// before the lease's TTL (60 s here). The executor, its own ping
// unanswered, connects again once the network is back.
func TestSilentExecutorLosesItsLeaseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{LeaseTTL: time.Minute, HeartbeatInterval: 20 * time.Second})
		ts := &testSessions{gate: make(chan struct{})}
		c, registered := f.countingClient(ts)
		defer f.shutdown(c)
		l := f.assign("s1", "block")
		var thawOnce sync.Once
		thaw := func() { thawOnce.Do(func() { f.net.thaw(); close(ts.gate) }) }
		defer thaw()
		errc := make(chan error, 1)
		go func() {
			_, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "block"})
			errc <- err
		}()
		synctest.Wait()
		f.net.freeze()
		cut := time.Now()
		err := <-errc
		if !errors.Is(err, ErrToolOutcomeUnknown) {
			t.Fatalf("CallTool = %v, want ErrToolOutcomeUnknown", err)
		}
		if d := time.Since(cut); d > executor.DefaultPingInterval+executor.DefaultPingTimeout {
			t.Fatalf("the silent executor was noticed %v after the cut, want within %v", d, executor.DefaultPingInterval+executor.DefaultPingTimeout)
		}
		thaw()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := registered.Load(); n < 2 {
			t.Fatalf("registered %d times: the executor did not connect again", n)
		}
	})
}
