package e2e

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/executor"
	ma "github.com/reinsdev/reins/managedagents"
)

// The agent ends of the SDKs under sdk/ are driven by a real `reins serve`
// through their e2e agent ends (sdk/typescript/e2e/agent.mjs,
// sdk/python/e2e/agent.py), child processes connected with a machine
// token; the official Go SDK drives the session. They are never skipped:
// without node or /usr/bin/python3 with websockets they fail.

func TestTypeScriptAgentEnd(t *testing.T) {
	node, dir := typeScriptSDK(t)
	sdkAgentEndScenario(t, func(url, token, name string) *exec.Cmd {
		return exec.Command(node, filepath.Join(dir, "e2e", "agent.mjs"), url, token, name)
	})
}

func TestPythonAgentEnd(t *testing.T) {
	py, dir := pythonSDK(t)
	sdkAgentEndScenario(t, func(url, token, name string) *exec.Cmd {
		return pythonCommand(py, dir, filepath.Join(dir, "e2e", "agent.py"), url, token, name)
	})
}

// sdkAgentEndScenario runs a session whose turns an SDK agent end (a
// child process started by command) runs: turn.start with the user's
// message, session.events with sequence numbers (a replayed batch is
// refused with -32013 and appended once), the tools token refreshed and
// the model token refused (model_token_unavailable: a scripted model),
// bash run on the session's executor through the platform tools endpoint
// and recorded as agent.tool_use/agent.tool_result, the end of the turn,
// then SessionEndedError (turn_inactive) for a late event; the second turn
// has the first in its transcript, and an interrupt reaches the agent end
// as turn.cancel.
func sdkAgentEndScenario(t *testing.T, command func(url, token, name string) *exec.Cmd) {
	s := start(t, options{})
	envID, key := s.selfHosted(t, "sdk brains")
	registered := make(chan struct{}, 1)
	startExecutorClientWith(t, s.url, key, "hands", func(o *executor.Options) {
		o.OnEvent = func(e executor.Event) {
			if e.Type == executor.EventRegistered {
				registered <- struct{}{}
			}
		}
	})
	within(t, registered, "the hands' registration")
	sessID, token := agentEndSessionIn(t, s, s.newAgent(t, "scripted", toolset(false)), envID)
	brain := startSDKExecutor(t, command(s.url, token, "sdk-brain"))
	brain.waitEvent(t, "registered", 20*time.Second)
	st := s.openStream(t, sessID)

	s.send(t, sessID, userMessage("hello"))
	evs := st.until(isIdle)
	got := slices.DeleteFunc(types(evs), func(typ string) bool { return typ == ma.EventUserMessage })
	want := []string{ma.EventStatusRunning, ma.EventAgentMessage, ma.EventAgentToolUse, ma.EventAgentToolResult, ma.EventAgentMessage, ma.EventSessionUsage, ma.EventStatusIdle}
	if !slices.Equal(got, want) || evs[len(evs)-1].StopReason.Type != ma.StopEndTurn {
		t.Fatalf("events %v, want %v ending end_turn", got, want)
	}
	if r := resultFrames(evs); len(r) != 1 || resultText(r[0]) != "hello" {
		t.Fatalf("tool results %v", describe(r))
	}
	first := brain.waitEvent(t, "turn", 5*time.Second)
	if first.Text != "hello" {
		t.Fatalf("turn.start %+v", first)
	}
	if l := brain.waitEvent(t, "replay_refused", 5*time.Second); l.Code != executor.CodeConflict || l.ExpectedSequence != 1 {
		t.Fatalf("the replayed batch: %+v, want -32013 expecting 1", l)
	}
	if l := brain.waitEvent(t, "tools_token", 5*time.Second); !l.OK {
		t.Fatalf("tools_token.refresh: %+v", l)
	}
	if l := brain.waitEvent(t, "model_token_refused", 5*time.Second); l.Reason != executor.ReasonModelTokenUnavailable {
		t.Fatalf("model_token.refresh: %+v", l)
	}
	if l := brain.waitEvent(t, "tool_result", 5*time.Second); l.Text != "hello" || l.ErrorCode != "" {
		t.Fatalf("the platform tool call: %+v", l)
	}
	if l := brain.waitEvent(t, "late_send", 5*time.Second); l.Error != "SessionEndedError" || l.Reason != executor.ReasonTurnInactive {
		t.Fatalf("an event after the end: %+v, want SessionEndedError turn_inactive", l)
	}
	if texts, _ := agentMessages(t, s, sessID); !slices.Equal(texts, []string{"You said: hello", "bash said: hello"}) {
		t.Fatalf("agent messages %q", texts)
	}

	s.send(t, sessID, userMessage("wait"))
	if l := brain.waitEvent(t, "turn", 10*time.Second); l.Text != "wait" || l.Transcript < first.Transcript+5 {
		t.Fatalf("second turn.start %+v: want the first turn in its transcript", l)
	}
	st.until(func(f frame) bool { return f.Type == ma.EventAgentMessage })
	s.send(t, sessID, interruptEvent())
	if stop := waitIdle(t, st); stop.Type != ma.StopEndTurn {
		t.Fatalf("after the interrupt: %+v", stop)
	}
	if l := brain.waitEvent(t, "turn_canceled", 10*time.Second); l.Reason != "interrupt" {
		t.Fatalf("turn.cancel: %+v", l)
	}
	sess, err := s.client.Beta.Sessions.Get(t.Context(), sessID, anthropic.BetaSessionGetParams{})
	if err != nil || sess.Status != "idle" {
		t.Fatalf("session %v %v", sess.Status, err)
	}
}
