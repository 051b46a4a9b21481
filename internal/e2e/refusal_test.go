package e2e

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestRefusalStopReason: a model that refuses ends the turn idle with the
// stop reason refusal and the model's stop_details, as the official SDK
// reads them; a category the model did not give is null.
func TestRefusalStopReason(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "cloud")
	for _, c := range []struct{ directive, category, explanation string }{
		{"@refuse cyber That request could cause harm.", "cyber", "That request could cause harm."},
		{"@refuse -", "", ""},
	} {
		sess := s.newSession(t, a.ID, env.ID)
		st := s.openStream(t, sess.ID)
		s.send(t, sess.ID, userMessage(c.directive))
		st.until(func(f frame) bool { return f.Type == "session.status_idle" })
		st.cancel()
		evs, err := s.client.Beta.Sessions.Events.List(context.Background(), sess.ID, anthropic.BetaSessionEventListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var idle *anthropic.BetaManagedAgentsSessionStatusIdleEvent
		for _, ev := range evs.Data {
			if ev.Type == "session.status_idle" {
				e := ev.AsSessionStatusIdle()
				idle = &e
			}
		}
		if idle == nil || idle.StopReason.Type != "refusal" || idle.StopDetails.Type != "refusal" ||
			string(idle.StopDetails.Category) != c.category || idle.StopDetails.Explanation != c.explanation ||
			idle.StopDetails.JSON.Category.Valid() != (c.category != "") {
			t.Fatalf("%s: idle %+v", c.directive, idle)
		}
		got, err := s.client.Beta.Sessions.Get(context.Background(), sess.ID, anthropic.BetaSessionGetParams{})
		if err != nil || got.Status != "idle" {
			t.Fatalf("session %v %s", err, got.Status)
		}
	}
}
