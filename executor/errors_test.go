package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

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
