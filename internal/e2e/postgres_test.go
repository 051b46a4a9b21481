package e2e

import (
	"slices"
	"testing"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/pgtest"
)

// TestServeOnPostgres runs a session with the store in PostgreSQL.
func TestServeOnPostgres(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	s := startWith(t, options{}, func(c *app.Config) { c.DatabaseURL = dsn })
	a := s.newAgent(t, "scripted", customTool("lookup"))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("hello postgres"))
	got := st.until(isIdle)
	want := []string{"user.message", "session.status_running", "user.message", "span.model_request_start", "agent.message", "span.model_request_end", "session.usage", "session.status_idle"}
	if !slices.Equal(types(got), want) || got[4].Content[0].Text != "You said: hello postgres" {
		t.Fatalf("stream %v", types(got))
	}
	listed := s.listAll(t, sess.ID)
	if len(listed) != 7 || listed[len(listed)-1].Type != "session.status_idle" {
		t.Fatalf("list %d events", len(listed))
	}
}
