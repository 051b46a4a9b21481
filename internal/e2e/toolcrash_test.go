package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/harness"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestToolCutOffByAKillIsNotRunAgain kills the server while a bash call
// runs. After the restart the model is told the tool may or may not have
// run, and the command is not started a second time.
func TestToolCutOffByAKillIsNotRunAgain(t *testing.T) {
	k := startKillable(t, "sk-reins-tool-crash-key")
	agent, env := k.toolAgentInCloud()
	var s ma.Session
	k.do("POST", "/v1/sessions", map[string]any{"agent": agent.ID, "environment_id": env.ID}, &s)
	script := `@tool bash {"command":"echo start >> ran.txt; (setsid sleep 1515 &); sleep 15"}` + "\n@then finished"
	body := map[string]any{"events": []any{map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": script}}}}}
	k.do("POST", "/v1/sessions/"+s.ID+"/events", body, nil)
	ran := filepath.Join(k.dir, "workspaces", env.ID, s.ID, "ran.txt")
	starts := func() int {
		b, _ := os.ReadFile(ran)
		return strings.Count(string(b), "start")
	}
	deadline := time.Now().Add(30 * time.Second)
	for starts() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the bash call did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}

	for countHostProcesses("sleep 1515") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the tool's detached process did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.kill() // mid-tool
	// Nothing the tool started outlives the server: its sandbox dies with
	// it, setsid or not.
	deadline = time.Now().Add(5 * time.Second)
	for countHostProcesses("sleep 15")+countHostProcesses("sleep 1515") > 0 {
		if time.Now().After(deadline) {
			t.Fatal("tool processes survived the server's SIGKILL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.start()

	var result, answer *ma.Event
	deadline = time.Now().Add(30 * time.Second)
	for answer == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the session did not finish its turn after the restart (tool result %+v)", result)
		}
		time.Sleep(50 * time.Millisecond)
		var evs struct{ Data []ma.Event }
		if _, err := call(k.url, k.key, "GET", "/v1/sessions/"+s.ID+"/events?limit=100", nil, &evs); err != nil {
			t.Fatal(err)
		}
		for i := range evs.Data {
			switch e := &evs.Data[i]; e.Type {
			case ma.EventAgentToolResult:
				result = e
			case ma.EventAgentMessage:
				answer = e
			}
		}
	}
	if result == nil || result.IsError == nil || !*result.IsError || len(result.Content) == 0 || result.Content[0].Text != harness.ToolInterruptedText {
		t.Fatalf("tool result after the restart = %+v, want the interrupted-tool error", result)
	}
	if len(answer.Content) == 0 || answer.Content[0].Text != "finished" {
		t.Fatalf("answer = %+v", answer)
	}
	if n := starts(); n != 1 {
		t.Fatalf("the command started %d times, want once", n)
	}
}
