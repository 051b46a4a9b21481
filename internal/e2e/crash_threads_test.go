package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestCrashRecoveryThreads: a coordinator delegates to two child threads;
// the server is killed (SIGKILL) while both children's model calls run.
// After a restart every thread finishes once: each child answers once,
// the coordinator collects both answers in one final answer, the session
// goes idle once, and the log has no event twice, no gap, and a closed
// span for every span opened.
func TestCrashRecoveryThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	key := "sk-reins-crash-threads-key"
	addr := freeAddr(t)
	c := startChild(t, bin, dataDir, addr, key)

	var one, two, coord ma.Agent
	for _, a := range []struct {
		out  *ma.Agent
		body map[string]any
	}{
		{&one, map[string]any{"name": "one", "model": "scripted"}},
		{&two, map[string]any{"name": "two", "model": "scripted"}},
	} {
		if _, err := call(c.url, key, "POST", "/v1/agents", a.body, a.out); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := call(c.url, key, "POST", "/v1/agents", map[string]any{"name": "coordinator", "model": "scripted",
		"multiagent": map[string]any{"type": "coordinator", "agents": []string{one.ID, two.ID}}}, &coord); err != nil {
		t.Fatal(err)
	}
	var env ma.Environment
	if _, err := call(c.url, key, "POST", "/v1/environments", map[string]any{"name": "crash"}, &env); err != nil {
		t.Fatal(err)
	}
	var sess ma.Session
	if _, err := call(c.url, key, "POST", "/v1/sessions", map[string]any{"agent": coord.ID, "environment_id": env.ID}, &sess); err != nil {
		t.Fatal(err)
	}
	text := spawnLine("one", "@sleep 3s\n@text answer of one") + "\n" + spawnLine("two", "@sleep 3s\n@text answer of two") + "\n@then Delegated."
	var echo struct{ Data []ma.Event }
	body := map[string]any{"events": []any{map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": text}}}}}
	if _, err := call(c.url, key, "POST", "/v1/sessions/"+sess.ID+"/events", body, &echo); err != nil {
		t.Fatal(err)
	}

	// Wait until both children's model calls are under way, then kill.
	children := waitChildrenCalling(t, c, key, sess.ID, 2)
	time.Sleep(300 * time.Millisecond)
	c.kill()
	c = startChild(t, bin, dataDir, addr, key)

	deadline := time.Now().Add(60 * time.Second)
	for {
		var s ma.Session
		if _, err := call(c.url, key, "GET", "/v1/sessions/"+sess.ID, nil, &s); err != nil {
			t.Fatal(err)
		}
		if s.Status == ma.StatusIdle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is still %s after the restart", s.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopChild(t, c)

	st, err := sqlite.Open(context.Background(), filepath.Join(dataDir, "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkThreadsRecovered(t, st, sess.ID, echo.Data[0].ID, children)
}

// waitChildrenCalling waits until n child threads of the session have a
// model call under way (a span.model_request_start on their streams) and
// returns their ids.
func waitChildrenCalling(t *testing.T, c *child, key, sessionID string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var list struct{ Data []ma.SessionThread }
		if _, err := call(c.url, key, "GET", "/v1/sessions/"+sessionID+"/threads", nil, &list); err != nil {
			t.Fatal(err)
		}
		var calling []string
		for _, th := range list.Data {
			if th.ParentThreadID == nil {
				continue
			}
			var evs struct{ Data []ma.Event }
			call(c.url, key, "GET", fmt.Sprintf("/v1/sessions/%s/threads/%s/events?limit=100", sessionID, th.ID), nil, &evs)
			for _, e := range evs.Data {
				if e.Type == ma.EventSpanModelRequestStart {
					calling = append(calling, th.ID)
					break
				}
			}
		}
		if len(calling) == n {
			return calling
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d child threads did not start their model calls", n)
	return nil
}

// checkThreadsRecovered checks the log of a session whose coordinator
// delegated to the children and was recovered after a crash.
func checkThreadsRecovered(t *testing.T, st store.Store, sessionID, inputID string, children []string) {
	t.Helper()
	ctx := context.Background()
	log, err := st.ReadLog(ctx, sessionID, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range log {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d (gap or reuse)", e.Seq, i)
		}
	}
	live, err := st.ListEvents(ctx, sessionID, store.EventQuery{Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	type counts struct{ created, sent, received, messages, idles, starts, ends int }
	per := map[string]*counts{"": {}}
	for _, id := range children {
		per[id] = &counts{}
	}
	final := ""
	for _, e := range live {
		ev := e.Event
		if seen[ev.ID] {
			t.Fatalf("event %s (%s) listed twice", ev.ID, ev.Type)
		}
		seen[ev.ID] = true
		th := ma.StreamThread(sessionID, &ev)
		if th == ma.PrimaryThreadID(sessionID) {
			th = ""
		}
		c := per[th]
		if c == nil {
			t.Fatalf("event %s of an unknown thread %q", ev.Type, th)
		}
		switch ev.Type {
		case ma.EventThreadCreated:
			c.created++
		case ma.EventThreadMessageSent:
			c.sent++
		case ma.EventThreadMessageReceived:
			c.received++
		case ma.EventAgentMessage:
			c.messages++
			if th == "" {
				final = ev.Content[0].Text
			}
		case ma.EventStatusIdle, ma.EventThreadStatusIdle:
			if ev.StopReason == nil || ev.StopReason.Type != ma.StopEndTurn {
				t.Errorf("thread %q idle with %+v, want end_turn", th, ev.StopReason)
			}
			c.idles++
		case ma.EventSpanModelRequestStart:
			c.starts++
		case ma.EventSpanModelRequestEnd:
			c.ends++
		case ma.EventUserMessage:
			if ev.ProcessedAt == nil {
				t.Errorf("user.message %s never processed", ev.ID)
			}
		}
	}
	if !seen[inputID] {
		t.Fatalf("the acknowledged user.message %s is lost", inputID)
	}
	p := per[""]
	if p.created != 2 || p.sent != 2 || p.received != 2 || p.idles != 1 || p.starts != p.ends {
		t.Errorf("primary thread: %+v, want 2 threads created, 2 tasks sent, 2 answers received, one idle, every span closed", *p)
	}
	for _, id := range children {
		c := per[id]
		if c.sent != 1 || c.received != 1 || c.messages != 1 || c.idles != 1 || c.starts != c.ends || c.starts < 2 {
			t.Errorf("child %s: %+v, want one task, one answer, one idle, its cut call closed and made again", id, *c)
		}
	}
	if !strings.Contains(final, "answer of one") || !strings.Contains(final, "answer of two") {
		t.Errorf("the coordinator's final answer %q does not collect both answers", final)
	}
}
