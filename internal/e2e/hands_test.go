package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// workStates returns the states of an environment's work items.
func (s *server) workStates(t *testing.T, envID string) []string {
	t.Helper()
	var page struct {
		Data []struct{ ID, State string }
	}
	if _, err := call(s.url, s.key, "GET", "/v1/environments/"+envID+"/work?limit=100", nil, &page); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range page.Data {
		out = append(out, w.State)
	}
	return out
}

// TestExecutorSessionIsNeverOfferedToAPullWorker: a self-hosted session
// served by `reins executor` leaves no queued work behind, and an official
// environment worker started later never gets it (it would run again every
// tool use that has no user.tool_result).
func TestExecutorSessionIsNeverOfferedToAPullWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs reins executor")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, options{})
	envID, key := s.selfHosted(t, "hands")
	a := s.newAgent(t, "scripted", toolset(false))
	startExecutor(t, bin, s.url, key, "hands")
	ran := `@tool bash {"command":"echo ran >> count.txt"}` + "\n@then done"

	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(ran))
	got := st.until(isIdle)
	if got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("turn: %v", types(got))
	}
	// A session that never ran a tool: its item retires when it idles.
	quiet := s.newSession(t, a.ID, envID)
	qst := s.openStream(t, quiet.ID)
	s.send(t, quiet.ID, userMessage("hello"))
	qst.until(isIdle)
	deadline := time.Now().Add(5 * time.Second)
	for {
		states := s.workStates(t, envID)
		done := true
		for _, st := range states {
			done = done && st == "stopped"
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("work items after both sessions idled: %v, want all stopped", states)
		}
		time.Sleep(50 * time.Millisecond)
	}

	workdir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	idle := 2 * time.Second
	worker := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(s.url), option.WithMaxRetries(0)),
		environments.EnvironmentWorkerOptions{EnvironmentID: envID, EnvironmentKey: key, Workdir: workdir, MaxIdle: &idle,
			Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	// The next turn is the executor's too, and the worker gets nothing.
	s.send(t, sess.ID, userMessage(ran))
	got = st.until(isIdle)
	results := 0
	for _, f := range got {
		switch f.Type {
		case "agent.tool_result":
			results++
		case "user.tool_result":
			t.Fatalf("a pull worker answered a tool use of an executor's session: %+v", f)
		}
	}
	if results != 1 {
		t.Fatalf("%d agent.tool_result, want 1: %v", results, types(got))
	}
	time.Sleep(time.Second) // a poll or two
	if entries, _ := os.ReadDir(workdir); len(entries) > 0 {
		t.Fatalf("the pull worker ran tools of an executor's session: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(workdir, "count.txt")); err == nil {
		t.Fatal("the pull worker re-ran the executor's bash call")
	}
	for _, state := range s.workStates(t, envID) {
		if state != "stopped" {
			t.Fatalf("work items: %v, want all stopped", s.workStates(t, envID))
		}
	}
}

// TestOneSlotExecutorServesSessionsInARow: an executor with one slot (the
// default --max-sessions 1) serves a new session as soon as the previous
// one idles, not when its lease would end, and the first session gets the
// slot back for its next turn.
func TestOneSlotExecutorServesSessionsInARow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs reins executor")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, options{})
	envID, key := s.selfHosted(t, "one slot")
	a := s.newAgent(t, "scripted", toolset(false))
	startExecutor(t, bin, s.url, key, "one-slot")
	first := s.newSession(t, a.ID, envID)
	second := s.newSession(t, a.ID, envID)
	turn := func(sessionID, name string) {
		t.Helper()
		st := s.openStream(t, sessionID)
		defer st.cancel()
		began := time.Now()
		s.send(t, sessionID, userMessage(`@tool bash {"command":"echo `+name+`"}`+"\n@then done"))
		got := st.until(isIdle)
		if d := time.Since(began); d > 5*time.Second {
			t.Fatalf("%s turn took %s (lease TTL 30 s)", name, d)
		}
		for _, f := range got {
			if f.Type == "agent.tool_result" {
				if f.IsError != nil && *f.IsError {
					t.Fatalf("%s: tool error %+v", name, f.Content)
				}
				return
			}
		}
		t.Fatalf("%s: no tool result: %v", name, types(got))
	}
	turn(first.ID, "first")
	turn(second.ID, "second")
	turn(first.ID, "first again")
}
