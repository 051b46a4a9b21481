package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
)

// bashTurn sends one bash turn to a session and returns how long it took
// from the send to session.status_idle.
func (s *server) bashTurn(t *testing.T, sessionID, word string) time.Duration {
	t.Helper()
	st := s.openStream(t, sessionID)
	defer st.cancel()
	begin := time.Now()
	s.send(t, sessionID, userMessage(fmt.Sprintf(`@tool bash {"command":"echo %s"}`+"\n@then done", word)))
	got := st.until(isIdle)
	took := time.Since(begin)
	for _, ev := range got {
		if ev.Type == "agent.tool_result" && ev.IsError != nil && *ev.IsError {
			t.Fatalf("session %s: the bash call failed: %+v", sessionID, ev.Content)
		}
		if ev.Type == "session.status_rescheduled" || ev.Type == "session.error" {
			t.Fatalf("session %s waited or failed: %v", sessionID, types(got))
		}
	}
	return took
}

// turnBudget is the longest a one-bash turn may take: a wait for a slot
// lasted 8–10 s before sessions gave their slots back. A turn takes
// milliseconds on a quiet machine, but up to 3 s on a loaded 2-core one
// (p50 1.1 s, max 2.7 s at a load average of 30), so the budget sits
// between that and a wait for a slot.
const turnBudget = 5 * time.Second

// TestDeletedSessionsFreeTheirSlots: 200 sessions, one after another in
// one cloud environment, each run one bash call and are deleted; none
// waits for a slot held by a deleted one.
func TestDeletedSessionsFreeTheirSlots(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	var took []time.Duration
	for i := range 200 {
		sess := s.newSession(t, a.ID, env.ID)
		took = append(took, s.bashTurn(t, sess.ID, fmt.Sprint("s", i)))
		if _, err := s.client.Beta.Sessions.Delete(context.Background(), sess.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
			t.Fatal(err)
		}
	}
	p50, p99, top := quantiles(took)
	t.Logf("200 sessions, one bash turn each: p50 %v, p99 %v, max %v", p50, p99, top)
	if top > turnBudget {
		t.Fatalf("a turn took %v (p50 %v): it waited for a slot", top, p50)
	}
}

// TestIdleSessionsDoNotDelayTheNext: 100 sessions that ran a bash call
// and sit idle do not delay the 101st.
func TestIdleSessionsDoNotDelayTheNext(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	var idle []string
	for i := range 100 {
		sess := s.newSession(t, a.ID, env.ID)
		s.bashTurn(t, sess.ID, fmt.Sprint("s", i))
		idle = append(idle, sess.ID)
	}
	next := s.newSession(t, a.ID, env.ID)
	if took := s.bashTurn(t, next.ID, "next"); took > turnBudget {
		t.Fatalf("the 101st session's turn took %v", took)
	}
	// An idle session's next turn runs too (its slot may have moved).
	if took := s.bashTurn(t, idle[0], "again"); took > turnBudget {
		t.Fatalf("an idle session's next turn took %v", took)
	}
}

func quantiles(ds []time.Duration) (p50, p99, top time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100], s[len(s)-1]
}

// TestFullServerQueuesSessionsWithAReason: with two slots busy, a third
// session waits in "rescheduling", says why, and runs when one frees.
func TestFullServerQueuesSessionsWithAReason(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) {
		c.Sandbox.Limits.Memory = 1 << 30
		c.Sandbox.MemoryBudget = 2 << 30 // two slots
	})
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	var busy []*stream
	for i := range 2 {
		sess := s.newSession(t, a.ID, env.ID)
		st := s.openStream(t, sess.ID)
		s.send(t, sess.ID, userMessage(fmt.Sprintf(`@tool bash {"command":"sleep 2; echo busy%d"}`+"\n@then done", i)))
		st.until(func(f frame) bool { return f.Type == "agent.tool_use" })
		busy = append(busy, st)
	}
	third := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, third.ID)
	s.send(t, third.ID, userMessage(`@tool bash {"command":"echo third"}`+"\n@then done"))
	got := st.until(func(f frame) bool { return f.Type == "session.status_rescheduled" })
	why := got[len(got)-1].Reason
	if !strings.Contains(why, "all 2 tool slots") || !strings.Contains(why, "number 1 in line") {
		t.Fatalf("rescheduled without saying why: %q", why)
	}
	got = st.until(isIdle)
	i := slices.IndexFunc(got, func(f frame) bool { return f.Type == "agent.tool_result" })
	if i < 0 || (got[i].IsError != nil && *got[i].IsError) || !strings.Contains(got[i].Content[0].Text, "third") {
		t.Fatalf("the third session's call did not run once a slot freed: %v", types(got))
	}
	for _, b := range busy {
		b.until(isIdle)
	}
}

// TestSlotsChurn: more sessions than slots run bash turns at once, again
// and again: idle sessions lose their slots to waiting ones and get them
// back, and every call runs.
func TestSlotsChurn(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) {
		c.Sandbox.Limits.Memory = 1 << 30
		c.Sandbox.MemoryBudget = 3 << 30 // three slots
	})
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	var wg sync.WaitGroup
	for i := range 8 {
		sess := s.newSession(t, a.ID, env.ID)
		st := s.openStream(t, sess.ID)
		wg.Go(func() {
			for n := range 6 {
				s.send(t, sess.ID, userMessage(fmt.Sprintf(`@tool bash {"command":"echo s%d-%d"}`+"\n@then done", i, n)))
				got := st.until(isIdle)
				for _, ev := range got {
					if ev.Type == "agent.tool_result" && ev.IsError != nil && *ev.IsError {
						t.Errorf("session %d turn %d: %+v", i, n, ev.Content)
					}
				}
			}
		})
	}
	wg.Wait()
}
