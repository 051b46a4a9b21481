package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
)

// TestToolUseLimitReached: a model that asks for a tool in every response
// is stopped at reins's limit of tool-use rounds: the turn ends with an
// exhausted tool_use_limit_reached_error and the session goes idle with
// retries_exhausted, after exactly the limit's rounds.
func TestToolUseLimitReached(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "scripts"), 0o700)
	os.WriteFile(filepath.Join(dir, "scripts", "loop.txt"), []byte(`@tool bash {"command":"echo again"}`+"\n"), 0o600)
	const limit = 3
	s := startWith(t, options{dir: dir}, func(c *app.Config) { c.MaxToolRounds = limit })
	a := s.newAgent(t, "scripted/loop", toolset(false))
	env := s.newEnv(t, "cloud")
	sess := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("go"))
	st.until(func(f frame) bool { return f.Type == "session.status_idle" })
	st.cancel()
	evs, err := s.client.Beta.Sessions.Events.List(context.Background(), sess.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	uses, limited := 0, 0
	var stop string
	for _, ev := range evs.Data {
		switch ev.Type {
		case "agent.tool_use":
			uses++
		case "session.error":
			e := ev.AsSessionError().Error
			if e.Type != "tool_use_limit_reached_error" || e.RetryStatus.Type != "exhausted" {
				t.Fatalf("session.error %s", ev.RawJSON())
			}
			limited++
		case "session.status_idle":
			stop = ev.AsSessionStatusIdle().StopReason.Type
		}
	}
	if uses != limit || limited != 1 || stop != "retries_exhausted" {
		t.Fatalf("%d tool uses, %d limit errors, stop %q", uses, limited, stop)
	}
}
