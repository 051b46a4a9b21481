package executorhub

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

// TestToolCallStaleLease: a tool.call whose lease is not the executor's
// current one for the session is -32003 lease_expired, and the tool does
// not run.
func TestToolCallStaleLease(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ts := &testSessions{}
	f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
	f.waitExecutors(1)
	l := f.assign("s1", "noop")
	err := l.Call(context.Background(), executor.MethodToolCall, executor.ToolCallParams{SessionID: "s1", LeaseID: "lease_stale", ToolCallID: "c1", Name: "noop"}, nil)
	wantReason(t, err, executor.CodeLeaseExpired, "")
	if n := ts.runs.Load(); n != 0 {
		t.Fatalf("%d runs of a call on a stale lease", n)
	}
}

// TestBusyToolCallSentAgain: an executor out of call slots answers
// -32009; the hub sends the call again until a slot frees, and a caller
// that gives up meanwhile leaves the call free to be made again.
func TestBusyToolCallSentAgain(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ts := &testSessions{gate: make(chan struct{})}
	f.client(executor.Options{Sessions: ts, Capabilities: testCaps, MaxSessions: 2, MaxConcurrentCalls: 1})
	f.waitExecutors(1)
	l1, l2 := f.assign("s1", "noop", "block"), f.assign("s2", "noop", "block")
	ctx := context.Background()
	blocked := make(chan error, 1)
	go func() {
		_, err := l1.CallTool(ctx, tool.Call{ID: "b1", Name: "block"})
		blocked <- err
	}()
	waitFor(t, func() bool { return ts.runs.Load() == 1 })

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := l2.CallTool(short, tool.Call{ID: "n1", Name: "noop"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CallTool while busy, caller gone = %v", err)
	}
	second := make(chan tool.Result, 1)
	go func() {
		res, err := l2.CallTool(ctx, tool.Call{ID: "n1", Name: "noop"})
		if err != nil {
			t.Error(err)
		}
		second <- res
	}()
	time.Sleep(150 * time.Millisecond) // refused as busy at least once more
	close(ts.gate)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-second:
		if res.IsError || len(res.Content) != 1 || res.Content[0].Text != "ok noop" {
			t.Fatalf("the busy call's result: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call refused as busy never ran")
	}
	if n := ts.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

// TestAssignPassesOverRejectingExecutor: the least busy executor rejects
// the session (session_rejected): Assign places it on the other one;
// when every executor rejects, the error wraps ErrAssignRejected with the
// reason.
func TestAssignPassesOverRejectingExecutor(t *testing.T) {
	f := newFixture(t, HubOptions{})
	f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps, MaxSessions: 4})
	f.waitExecutors(1)
	f.assign("warm", "noop")
	picky := &testSessions{}
	picky.setRefuse(executor.ReasonSessionRejected)
	f.client(executor.Options{Sessions: picky, Capabilities: testCaps, MaxSessions: 4, Executor: executor.ExecutorInfo{Name: "exec-picky"}})
	f.waitExecutors(2)
	l := f.assign("s1", "noop")
	if res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "noop"}); err != nil || res.IsError {
		t.Fatalf("CallTool on the accepting executor = %+v, %v", res, err)
	}
	if picky.runs.Load() != 0 || l.ExecutorID == "" {
		t.Fatal("the session ran on the rejecting executor")
	}

	f2 := newFixture(t, HubOptions{})
	f2.client(executor.Options{Sessions: picky, Capabilities: testCaps})
	f2.waitExecutors(1)
	_, err := f2.hub.Assign(context.Background(), AssignRequest{EnvironmentID: "env_1", SessionID: "s2", Tools: []string{"noop"}})
	if !errors.Is(err, ErrAssignRejected) || !strings.Contains(err.Error(), executor.ReasonSessionRejected) {
		t.Fatalf("Assign with only a rejecting executor = %v", err)
	}
}

// TestAcceptTurnRefusesWithMCPUnavailable: an agent end's AcceptTurn
// refuses a turn.start: the hub gets -32008 mcp_unavailable with the
// session.error type, the server and retryable, and the turn never runs.
func TestAcceptTurnRefusesWithMCPUnavailable(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ran := make(chan struct{}, 1)
	f.client(executor.Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: []string{executor.CapabilityAgent},
		Executor: executor.ExecutorInfo{Name: "brain"},
		Agent: executor.AgentHandlerFunc(func(ctx context.Context, tr *executor.Turn) error {
			ran <- struct{}{}
			return nil
		}),
		AcceptTurn: func(ctx context.Context, start *executor.TurnStart) error {
			return executor.MCPUnavailable("tools", errors.New("connection refused"))
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for {
		changed := f.hub.ChangedMachine("machine_1")
		_, err = f.hub.StartTurn(ctx, AgentTurnRequest{MachineIDs: []string{"machine_1"}, Start: executor.TurnStart{SessionID: "s1"}, Sink: &memSink{}})
		if !errors.Is(err, ErrNoAgentEnd) {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("no agent end registered")
		}
	}
	wantReason(t, err, executor.CodeMCPUnavailable, executor.ReasonMCPConnectionFailed)
	var re *executor.RPCError
	errors.As(err, &re)
	if !re.Retryable() || re.Data.MCPServerName != "tools" || !strings.Contains(re.Data.Detail, "connection refused") {
		t.Fatalf("refusal data %+v", re.Data)
	}
	select {
	case <-ran:
		t.Fatal("a refused turn ran")
	case <-time.After(50 * time.Millisecond):
	}
}
