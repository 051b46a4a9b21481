package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/model"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
)

// TestInterruptedToolMayHaveRun interrupts a bash call that already wrote
// a file: the log answers the tool use "may or may not have run", and the
// next turn's transcript says so, not "did not run".
func TestInterruptedToolMayHaveRun(t *testing.T) {
	fake := fakeanthropic.New(t)
	p := provider.New(provider.Options{APIKey: "test-key", BaseURL: fake.URL, HTTPClient: fake.Client()})
	dir := t.TempDir()
	s := start(t, options{models: model.Router{"anthropic": p}, dir: dir})
	a := s.newAgent(t, "claude-sonnet-5-5", toolset(false))
	env := s.newEnv(t, "cloud")
	sess := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, sess.ID)

	fake.Push(fakeanthropic.Reply(fakeanthropic.ToolUseBlock("toolu_1", "bash", `{"command":"echo started > proof.txt; sleep 20"}`)).WithStopReason("tool_use"))
	s.send(t, sess.ID, userMessage("run it"))
	proof := filepath.Join(dir, "workspaces", env.ID, sess.ID, "proof.txt")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(proof); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bash call did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.send(t, sess.ID, interruptEvent())
	got := st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" })
	var result *frame
	for i := range got {
		if got[i].Type == "agent.tool_result" {
			result = &got[i]
		}
	}
	if result == nil || result.IsError == nil || !*result.IsError || len(result.Content) == 0 || result.Content[0].Text != harness.ToolCutOffText {
		t.Fatalf("tool result after the interrupt = %+v (%v), want the cut-off error", result, types(got))
	}

	fake.Push(fakeanthropic.Text("noted"))
	s.send(t, sess.ID, userMessage("what happened?"))
	st.until(isIdle)
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	raw := string(reqs[1].Raw)
	if !strings.Contains(raw, "may or may not have run") || strings.Contains(raw, "did not run") {
		t.Fatalf("the next turn's transcript does not say the tool may have run:\n%s", raw)
	}
}
