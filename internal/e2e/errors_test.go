package e2e

import (
	"slices"
	"strings"
	"testing"
)

// TestSessionErrorsThroughSDK checks that the official SDK decodes
// session.error frames with their retry status, for failures injected by
// the scripted model.
func TestSessionErrorsThroughSDK(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)

	s.send(t, sess.ID, userMessage("@fail overloaded 2\n@text finally"))
	got := st.until(isIdle)
	var statuses []string
	for _, f := range got {
		if f.Type == "session.error" {
			statuses = append(statuses, f.Error.Type+"/"+f.Error.RetryStatus.Type)
			if !strings.Contains(f.Error.Message, "retrying in") {
				t.Fatalf("retrying message %q does not say when", f.Error.Message)
			}
		}
	}
	if !slices.Equal(statuses, []string{"model_overloaded_error/retrying", "model_overloaded_error/retrying"}) {
		t.Fatalf("errors %v (stream %v)", statuses, types(got))
	}
	if got[len(got)-1].StopReason.Type != "end_turn" || got[len(got)-4].Content[0].Text != "finally" {
		t.Fatalf("turn did not recover: %v", types(got))
	}

	s.send(t, sess.ID, userMessage("@fail billing"))
	got = st.until(isIdle)
	errs := 0
	for _, f := range got {
		if f.Type == "session.error" {
			errs++
			if f.Error.Type != "billing_error" || f.Error.RetryStatus.Type != "exhausted" {
				t.Fatalf("billing failure reported as %+v", f.Error)
			}
		}
	}
	if errs != 1 || got[len(got)-1].StopReason.Type != "retries_exhausted" {
		t.Fatalf("want one exhausted billing_error then retries_exhausted: %v", types(got))
	}
}
