package executor_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reinsdev/reins/executor"
)

// A handler error keeps its code and data on the wire.
func ExampleWithReason() {
	err := executor.WithReason(executor.CodeResourceUnavailable, executor.ReasonWorkspaceUnavailable, "disk full")
	wire, _ := json.Marshal(err.ToWire())
	fmt.Println(string(wire))
	fmt.Println(err.Retryable())
	// Output:
	// {"code":-32011,"message":"disk full","data":{"retryable":true,"reason":"workspace_unavailable"}}
	// true
}

// Which close codes end a client for good.
func ExampleIsTerminalCloseCode() {
	for _, code := range []int{executor.CloseTokenExpired, executor.CloseRegistrationRefused,
		executor.CloseUnsupportedProtocol, executor.CloseReplaced, executor.CloseDrained} {
		fmt.Println(code, executor.IsTerminalCloseCode(code))
	}
	// Output:
	// 4001 false
	// 4002 false
	// 4003 true
	// 4004 true
	// 4005 false
}

// Errors from Run are matched with errors.Is; CloseCode reads the close
// code they carry.
func ExampleCloseCode() {
	err := fmt.Errorf("%w: %w", executor.ErrReplaced, errors.New("connection closed"))
	fmt.Println(errors.Is(err, executor.ErrReplaced), executor.CloseCode(err))
	// Output: true -1
}
