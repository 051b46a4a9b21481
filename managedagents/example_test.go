package managedagents_test

import (
	"encoding/json"
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
)

// An event from a session's stream or list decodes into Event; which
// fields are set depends on its type.
func ExampleEvent() {
	data := []byte(`{"type":"session.error","id":"sevt_1","processed_at":"2026-11-30T00:00:00Z",
		"error":{"type":"model_overloaded_error","message":"Overloaded","retry_status":{"type":"retrying"}}}`)
	var ev ma.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		panic(err)
	}
	fmt.Println(ev.Type, ev.Error.Type, ev.Error.RetryStatus.Type == ma.RetryRetrying)
	// Output: session.error model_overloaded_error true
}

// Tools marshal to the fields of their own type, with toolset configs
// always present.
func ExampleTool() {
	allow := &ma.PermissionPolicy{Type: ma.PolicyAlwaysAllow}
	t := ma.Tool{Type: ma.ToolTypeAgentToolset, DefaultConfig: &ma.ToolConfig{Enabled: true, PermissionPolicy: allow}}
	b, _ := json.Marshal(t)
	fmt.Println(string(b))
	// Output: {"type":"agent_toolset_20260401","default_config":{"enabled":true,"permission_policy":{"type":"always_allow"}},"configs":[]}
}

// Every error response has the same envelope.
func ExampleErrorEnvelope() {
	b, _ := json.Marshal(ma.ErrorEnvelope{Type: "error", Error: ma.ErrorBody{Type: ma.ErrNotFound, Message: "session sesn_x not found"}, RequestID: "req_1"})
	fmt.Println(string(b))
	// Output: {"type":"error","error":{"type":"not_found_error","message":"session sesn_x not found"},"request_id":"req_1"}
}
