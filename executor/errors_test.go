package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
)

func TestErrorTable(t *testing.T) {
	// The seed's table, code for code.
	want := map[int]string{
		-32700: "parse_error", -32600: "invalid_request", -32601: "method_not_found", -32602: "invalid_params",
		-32603: "internal_error", -32000: "unauthorized", -32001: "forbidden", -32002: "not_found",
		-32003: "lease_expired", -32004: "timeout", -32005: "canceled", -32006: "payload_too_large",
		-32007: "session_not_active", -32008: "mcp_unavailable", -32009: "executor_busy",
		-32010: "unsupported_protocol", -32011: "resource_unavailable", -32012: "capability_unavailable",
		-32013: "conflict",
	}
	for code, name := range want {
		if got := CodeMessage(code); got != name {
			t.Errorf("CodeMessage(%d) = %q, want %q", code, got, name)
		}
	}
	if len(codeNames) != len(want) {
		t.Errorf("%d codes defined, the table has %d", len(codeNames), len(want))
	}
	for _, code := range []int{CodeTimeout, CodeExecutorBusy, CodeResourceUnavailable} {
		if !NewRPCError(code, "").Retryable() {
			t.Errorf("%d is retryable", code)
		}
	}
	e := WithReason(CodeCapabilityUnavailable, ReasonCapabilityMissing, "")
	e.Data.Capability = "tool:read"
	b, _ := json.Marshal(e.ToWire())
	if string(b) != `{"code":-32012,"message":"capability_unavailable","data":{"capability":"tool:read","reason":"capability_missing"}}` {
		t.Errorf("wire form %s", b)
	}
	if e.Retryable() {
		t.Error("-32012 is not retryable")
	}
	// A handler's *RPCError keeps its code; other errors are -32603.
	if toRPCError(fmt.Errorf("wrapped: %w", e)) != e {
		t.Error("a wrapped *RPCError lost its identity")
	}
	if toRPCError(errors.New("boom")).Code != CodeInternalError {
		t.Error("plain errors are internal_error")
	}
	for code, terminal := range map[int]bool{4001: false, 4002: false, 4003: true, 4004: true, 4005: false, 1000: false} {
		if IsTerminalCloseCode(code) != terminal {
			t.Errorf("IsTerminalCloseCode(%d) = %v", code, !terminal)
		}
	}
	if CloseCode(errors.New("x")) != -1 || CloseCode(fmt.Errorf("w: %w", websocket.CloseError{Code: 4004})) != 4004 ||
		CloseCode(&closeError{code: 4001}) != 4001 {
		t.Error("CloseCode")
	}
}

// blockingProcesses is a session whose process.start never answers.
type blockingProcesses struct{ *testSession }

func (b blockingProcesses) StartProcess(ctx context.Context, p ProcessStart, onExit func(ProcessExit)) (ProcessInfo, error) {
	<-ctx.Done()
	return ProcessInfo{}, ctx.Err()
}

func (b blockingProcesses) SignalProcess(ctx context.Context, p ProcessSignal) (ProcessState, error) {
	return ProcessState{}, nil
}

type blockingOpener struct{}

func (blockingOpener) OpenSession(context.Context, Assignment) (Session, error) {
	return blockingProcesses{&testSession{s: &testSessions{}}}, nil
}

func TestRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{RequestTimeout: 5 * time.Second})
		c := f.client(Options{Sessions: blockingOpener{}, Capabilities: append([]string{CapabilityProcess}, testCaps...)})
		l := f.assign("s1", "noop")
		start := time.Now()
		err := l.Call(context.Background(), MethodProcessStart, ProcessStart{SessionID: "s1", ProcessID: "p", Spec: ProcessSpec{Argv: []string{"x"}}}, nil)
		var te *RequestTimeoutError
		if !errors.As(err, &te) || te.Method != MethodProcessStart || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Call = %v, want RequestTimeoutError", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("timed out after %s", d)
		}
		f.shutdown(c)
	})
}
