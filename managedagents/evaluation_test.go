package managedagents

import (
	"encoding/json"
	"testing"
)

// TestEvaluate: each permission policy gives the evaluated permission and
// the evaluation object of the wire.
func TestEvaluate(t *testing.T) {
	for policy, want := range map[string]string{
		PolicyAlwaysAllow: `allow {"type":"always_allow"}`,
		PolicyAlwaysAsk:   `ask {"type":"always_ask"}`,
		PolicyAuto:        `ask {"type":"auto","evaluated_permission":{"type":"ask","reason_code":"indeterminate"}}`,
	} {
		perm, eval := Evaluate(policy)
		b, err := json.Marshal(eval)
		if err != nil {
			t.Fatal(err)
		}
		if got := perm + " " + string(b); got != want {
			t.Errorf("%s: got %s, want %s", policy, got, want)
		}
	}
}
