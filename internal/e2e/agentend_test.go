package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/harness"
	ma "github.com/reinsdev/reins/managedagents"
)

// agentEndSession makes a self-hosted environment, a machine scoped to it
// and a session whose turns run on an agent end; it returns the session
// id and the machine token.
func agentEndSession(t *testing.T, s *server) (sessionID, token string) {
	t.Helper()
	return agentEndSessionWith(t, s, s.newAgent(t, "scripted"))
}

// agentEndSessionWith is agentEndSession with the agent a.
func agentEndSessionWith(t *testing.T, s *server, a *anthropic.BetaManagedAgentsAgent) (sessionID, token string) {
	t.Helper()
	envID, _ := s.selfHosted(t, "brains")
	return agentEndSessionIn(t, s, a, envID)
}

// agentEndSessionIn is agentEndSessionWith in the self-hosted environment
// envID.
func agentEndSessionIn(t *testing.T, s *server, a *anthropic.BetaManagedAgentsAgent, envID string) (sessionID, token string) {
	t.Helper()
	var m machineView
	if _, err := call(s.url, s.key, "POST", "/v1/machines", map[string]any{"name": "brain-box", "environment_ids": []string{envID}}, &m); err != nil {
		t.Fatal(err)
	}
	sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)},
		EnvironmentID: envID,
		Metadata:      map[string]string{harness.AgentEndMetadataKey: "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess.ID, m.Token
}

// agentEnd runs an agent end (machine-scoped, capability agent) with
// handler; it is stopped at cleanup or by the returned function.
func agentEnd(t *testing.T, s *server, token, name string, handler executor.AgentHandlerFunc) (stop func()) {
	t.Helper()
	return agentEndWith(t, s, token, name, handler, nil)
}

// agentEndWith is agentEnd with options adjusted by adjust (if not nil).
func agentEndWith(t *testing.T, s *server, token, name string, handler executor.AgentHandlerFunc, adjust func(*executor.Options)) (stop func()) {
	t.Helper()
	hc := ownHTTPClient(t)
	opts := executor.Options{URL: s.url, MachineToken: token, Executor: executor.ExecutorInfo{Name: name}, HTTPClient: hc,
		Capabilities: []string{executor.CapabilityAgent}, Sessions: &executor.BuiltinSessions{Dir: t.TempDir()}, Agent: handler,
		BackoffMin: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if adjust != nil {
		adjust(&opts)
	}
	c := executor.NewClient(opts)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(context.Background()) }()
	stop = func() { c.Stop(); <-done }
	t.Cleanup(stop)
	return stop
}

// inputText is the text of the turn's first user.message.
func inputText(tr *executor.Turn) string {
	for _, raw := range tr.Start.Inputs {
		var ev ma.Event
		if json.Unmarshal(raw, &ev) == nil && ev.Type == ma.EventUserMessage && len(ev.Content) > 0 {
			return ev.Content[0].Text
		}
	}
	return ""
}

func agentMessage(text string) ma.Event {
	return ma.Event{Type: ma.EventAgentMessage, Content: []ma.ContentBlock{{Type: "text", Text: text}}}
}

// TestAgentEndRunsTurns: the official SDK drives a session whose turns an
// agent end runs: it gets turn.start with the user's message, appends an
// agent.message and the end of the turn, and the SDK sees the same
// events as with the built-in loop (running, user.message,
// agent.message, idle end_turn); the second turn gets the first in its
// transcript.
func TestAgentEndRunsTurns(t *testing.T) {
	s := start(t, options{})
	sessID, token := agentEndSession(t, s)
	agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		said := 0 // agent messages in the transcript
		for _, raw := range tr.Start.Transcript {
			var ev ma.Event
			if json.Unmarshal(raw, &ev) == nil && ev.Type == ma.EventAgentMessage {
				said++
			}
		}
		if err := tr.Send(ctx, agentMessage(fmt.Sprintf("echo: %s (said %d)", inputText(tr), said))); err != nil {
			return err
		}
		return tr.EndTurn(ctx)
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("hello"))
	evs := st.until(isIdle)
	got := slices.DeleteFunc(types(evs), func(typ string) bool { return typ == ma.EventUserMessage })
	if !slices.Equal(got, []string{ma.EventStatusRunning, ma.EventAgentMessage, ma.EventSessionUsage, ma.EventStatusIdle}) || !slices.Contains(types(evs), ma.EventUserMessage) {
		t.Fatalf("events %v", types(evs))
	}
	msg := evs[slices.IndexFunc(evs, func(f frame) bool { return f.Type == ma.EventAgentMessage })]
	if len(msg.Content) != 1 || msg.Content[0].Text != "echo: hello (said 0)" {
		t.Fatalf("agent.message = %+v", msg.Content)
	}
	if last := evs[len(evs)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("idle = %+v", last.StopReason)
	}
	s.send(t, sessID, userMessage("again"))
	evs = st.until(isIdle)
	i := slices.IndexFunc(evs, func(f frame) bool { return f.Type == ma.EventAgentMessage })
	if i < 0 || evs[i].Content[0].Text != "echo: again (said 1)" {
		t.Fatalf("second turn: %+v", evs)
	}
}

// TestAgentEndInterrupt: an interrupt during an agent-end turn ends the
// turn (idle, end_turn) and reaches the agent end as turn.cancel.
func TestAgentEndInterrupt(t *testing.T) {
	s := start(t, options{})
	sessID, token := agentEndSession(t, s)
	started, canceled := make(chan struct{}, 1), make(chan struct{}, 1)
	agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		if err := tr.Send(ctx, agentMessage("thinking hard")); err != nil {
			return err
		}
		started <- struct{}{}
		<-ctx.Done()
		canceled <- struct{}{}
		return nil
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("long task"))
	within(t, started, "turn.start on the agent end")
	s.send(t, sessID, interruptEvent())
	evs := st.until(isIdle)
	if !slices.Contains(types(evs), ma.EventUserInterrupt) {
		t.Fatalf("events %v", types(evs))
	}
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupt did not reach the agent end")
	}
}

// TestAgentEndLostMidTurn: the agent end stops mid-turn: the session
// records a retrying session.error and waits in rescheduling; a new agent
// end connects and the turn completes on it, with what the first one
// appended in its transcript and appended once.
func TestAgentEndLostMidTurn(t *testing.T) {
	s := start(t, options{})
	sessID, token := agentEndSession(t, s)
	sent := make(chan struct{}, 1)
	stop := agentEnd(t, s, token, "brain-1", func(ctx context.Context, tr *executor.Turn) error {
		if err := tr.Send(ctx, agentMessage("first half")); err != nil {
			return err
		}
		sent <- struct{}{}
		<-ctx.Done()
		return nil
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("work"))
	within(t, sent, "first session.event of the agent end")
	stop()
	evs := st.until(func(f frame) bool { return f.Type == ma.EventStatusRescheduled })
	i := slices.IndexFunc(evs, func(f frame) bool { return f.Type == ma.EventSessionError })
	if i < 0 || evs[i].Error.RetryStatus.Type != ma.RetryRetrying {
		t.Fatalf("no retrying session.error before rescheduling: %v", types(evs))
	}
	transcript := make(chan int, 1)
	agentEnd(t, s, token, "brain-2", func(ctx context.Context, tr *executor.Turn) error {
		transcript <- len(tr.Start.Transcript)
		if err := tr.Send(ctx, agentMessage("second half")); err != nil {
			return err
		}
		return tr.EndTurn(ctx)
	})
	evs = st.until(isIdle)
	if n := within(t, transcript, "turn.start on the new agent end"); n == 0 {
		t.Fatal("the new agent end got no transcript")
	}
	if last := evs[len(evs)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("idle = %+v", last.StopReason)
	}
	if texts, _ := agentMessages(t, s, sessID); !slices.Equal(texts, []string{"first half", "second half"}) {
		t.Fatalf("agent messages %q", texts)
	}
}

// within receives from ch, failing the test after 15 s.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("no %s within 15 s", what)
		var zero T
		return zero
	}
}

// buildAgentEndExample builds examples/agentend once per test binary,
// per checkout.
var buildAgentEndExample = sync.OnceValues(func() (string, error) {
	return buildBinary("github.com/reinsdev/reins/examples/agentend", "agentend-example")
})

// startAgentEndExample runs the example agent end as a child process.
func startAgentEndExample(t *testing.T, bin, url, token, name string, delay time.Duration) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "-url", url, "-name", name, "-delay", delay.String())
	cmd.Env = append(os.Environ(), "REINS_MACHINE_TOKEN="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return cmd
}

// TestAgentEndProcessKilledMidTurn: the example agent end, a child
// process, is killed with SIGKILL mid-turn (after its agent.thinking): the
// session records a retrying session.error and waits in rescheduling;
// a new agent end process connects and the turn completes on it, its
// answer appended once.
func TestAgentEndProcessKilledMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	bin, err := buildAgentEndExample()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, options{})
	sessID, token := agentEndSession(t, s)
	first := startAgentEndExample(t, bin, s.url, token, "brain-1", time.Hour)
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("kill me"))
	st.until(func(f frame) bool { return f.Type == ma.EventAgentThinking })
	first.Process.Signal(syscall.SIGKILL)
	evs := st.until(func(f frame) bool { return f.Type == ma.EventStatusRescheduled })
	i := slices.IndexFunc(evs, func(f frame) bool { return f.Type == ma.EventSessionError })
	if i < 0 || evs[i].Error.RetryStatus.Type != ma.RetryRetrying {
		t.Fatalf("no retrying session.error before rescheduling: %v", types(evs))
	}
	startAgentEndExample(t, bin, s.url, token, "brain-2", 0)
	evs = st.until(isIdle)
	if last := evs[len(evs)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("idle = %+v (%v)", last.StopReason, types(evs))
	}
	if answers, _ := agentMessages(t, s, sessID); !slices.Equal(answers, []string{"You said: kill me"}) {
		t.Fatalf("agent messages %q", answers)
	}
}

// TestAgentEndRefusedEvents: an event an agent end may not append
// (agent.tool_use, which belongs to the platform tools endpoint; an
// unknown custom tool) is -32602 and nothing of its batch is appended;
// refreshes answer model_token_unavailable (the gateway serves no
// scripted model: turn.start has no model grant) and
// tools_token_unavailable; after the turn ended, events are
// turn_inactive.
func TestAgentEndRefusedEvents(t *testing.T) {
	s := start(t, options{})
	sessID, token := agentEndSession(t, s)
	results := make(chan error, 1)
	agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		results <- func() error {
			for _, bad := range []ma.Event{
				{Type: ma.EventAgentToolUse, Name: "bash", Input: json.RawMessage(`{"command":"id"}`)},
				{Type: ma.EventAgentCustomToolUse, Name: "not_a_tool", Input: json.RawMessage(`{}`)},
			} {
				var re *executor.RPCError
				if err := tr.Send(ctx, agentMessage("before"), bad); !errors.As(err, &re) || re.Code != executor.CodeInvalidParams {
					return fmt.Errorf("%s: %v, want -32602", bad.Type, err)
				}
			}
			if tr.Start.Model != nil {
				return fmt.Errorf("a model grant for a scripted model: %+v", tr.Start.Model)
			}
			var re *executor.RPCError
			if _, err := tr.RefreshModelToken(ctx); !errors.As(err, &re) || re.Reason() != executor.ReasonModelTokenUnavailable {
				return fmt.Errorf("model refresh: %v", err)
			}
			if _, err := tr.RefreshToolsToken(ctx); !errors.As(err, &re) || re.Reason() != executor.ReasonToolsTokenUnavailable {
				return fmt.Errorf("tools refresh: %v", err)
			}
			if err := tr.Send(ctx, agentMessage("fine")); err != nil {
				return err
			}
			if err := tr.EndTurn(ctx); err != nil {
				return err
			}
			if err := tr.Send(ctx, agentMessage("late")); !errors.As(err, &re) || re.Reason() != executor.ReasonTurnInactive {
				return fmt.Errorf("after the end: %v, want turn_inactive", err)
			}
			return nil
		}()
		return nil
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("hi"))
	st.until(isIdle)
	if err := within(t, results, "the agent end's checks"); err != nil {
		t.Fatal(err)
	}
	texts, evs := agentMessages(t, s, sessID)
	for _, ev := range evs {
		if ev.Type == ma.EventAgentToolUse || ev.Type == ma.EventAgentCustomToolUse {
			t.Fatalf("a refused %s was appended", ev.Type)
		}
	}
	if !slices.Equal(texts, []string{"fine"}) {
		t.Fatalf("agent messages %q", texts)
	}
}

// agentMessages lists the session's events (up to 100) and returns the
// texts of its agent messages, in order, and the events.
func agentMessages(t *testing.T, s *server, sessID string) ([]string, []ma.Event) {
	t.Helper()
	var list ma.Page[ma.Event]
	if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sessID+"/events?limit=100", nil, &list); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, ev := range list.Data {
		if ev.Type == ma.EventAgentMessage {
			texts = append(texts, ev.Content[0].Text)
		}
	}
	return texts, list.Data
}
