package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/executor"
	ma "github.com/reinsdev/reins/managedagents"
)

// wholeTurnStart is the transcript and inputs a whole turn.start of the
// session carries now, from the API's list of its events: the events
// after the last idle that start the turn are the inputs, every other
// event is the transcript.
func wholeTurnStart(s *server, sessID string) (transcript, inputs []json.RawMessage, err error) {
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sessID+"/events?limit=1000", nil, &page); err != nil {
		return nil, nil, err
	}
	typ := make([]string, len(page.Data))
	cut := 0
	for i, raw := range page.Data {
		var ev struct{ Type string }
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, nil, err
		}
		if typ[i] = ev.Type; ev.Type == ma.EventStatusIdle {
			cut = i + 1
		}
	}
	for i, raw := range page.Data {
		if i >= cut && (typ[i] == ma.EventUserMessage || typ[i] == ma.EventUserCustomToolResult || typ[i] == ma.EventUserToolConfirmation) {
			inputs = append(inputs, raw)
		} else {
			transcript = append(transcript, raw)
		}
	}
	return transcript, inputs, nil
}

// sameEvents reports how got differs from want, byte for byte ("" when
// they are equal).
func sameEvents(what string, got, want []json.RawMessage) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			return fmt.Sprintf("%s[%d] = %s\nwant %s", what, i, got[i], want[i])
		}
	}
	return ""
}

// checkedTurn is a turn.start as a handler saw it, with how its
// transcript and inputs differ from a whole turn.start's ("" if not).
type checkedTurn struct {
	tr   *executor.Turn
	diff string
}

// deltaAgentEnd runs an agent end that hands its turns to the test, each
// checked against a whole turn.start of its session, and reports whether
// each accepted turn.start came as a delta (starts) and each
// transcript_unavailable refusal (refused).
func deltaAgentEnd(t *testing.T, s *server, token, name string, cache int) (turns <-chan checkedTurn, starts <-chan bool, refused <-chan string, stop func()) {
	t.Helper()
	tc, sc, rc := make(chan checkedTurn, 4), make(chan bool, 4), make(chan string, 4)
	stop = agentEndWith(t, s, token, name, func(ctx context.Context, tr *executor.Turn) error {
		transcript, inputs, err := wholeTurnStart(s, tr.Start.SessionID)
		diff := sameEvents("transcript", tr.Start.Transcript, transcript) + sameEvents("inputs", tr.Start.Inputs, inputs)
		if err != nil {
			diff = err.Error()
		}
		tc <- checkedTurn{tr, diff}
		return nil
	}, func(o *executor.Options) {
		o.TranscriptCache = cache
		o.OnEvent = func(e executor.Event) {
			switch e.Type {
			case executor.EventTurnStarted:
				sc <- e.Delta
			case executor.EventTranscriptUnavailable:
				rc <- e.SessionID
			}
		}
	})
	return tc, sc, rc, stop
}

// nextTurn receives the next turn, failing the test when its transcript
// or inputs differ from a whole turn.start's or it did not come as a
// delta when it should (or did when it should not).
func nextTurn(t *testing.T, turns <-chan checkedTurn, starts <-chan bool, delta bool) *executor.Turn {
	t.Helper()
	got := within(t, starts, "turn.start")
	ct := within(t, turns, "the handler's turn")
	if ct.diff != "" {
		t.Fatalf("turn.start as the handler saw it differs from a whole one: %s", ct.diff)
	}
	if got != delta {
		t.Fatalf("turn.start came as a delta: %v, want %v", got, delta)
	}
	return ct.tr
}

// TestAgentEndTranscriptDeltas: over turns with a platform tool call (the
// tools endpoint), a custom tool use answered by the client, an
// interrupt and the loss of the agent end, every turn.start after the
// first comes as a delta while the same connection serves the session,
// and the transcript the SDK rebuilds is byte for byte the one a whole
// turn.start carries; the new connection after the loss gets it whole,
// then deltas again.
func TestAgentEndTranscriptDeltas(t *testing.T) {
	s := start(t, options{})
	envID, envKey := s.selfHosted(t, "hands")
	startExecutorClient(t, s.url, envKey, "hands-1")
	a := s.newAgent(t, "scripted", toolset(false), customTool("lookup"))
	sessID, token := agentEndSessionIn(t, s, a, envID)
	turns, starts, refused, stop := deltaAgentEnd(t, s, token, "brain-1", executor.DefaultTranscriptCache)
	st := s.openStream(t, sessID)
	ctx := context.Background()

	s.send(t, sessID, userMessage("hello"))
	tr := nextTurn(t, turns, starts, false)
	if err := tr.Send(ctx, agentMessage("hi")); err != nil {
		t.Fatal(err)
	}
	if err := tr.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, st)

	// A bash call through the tools endpoint, then a custom tool use.
	s.send(t, sessID, userMessage("work"))
	tr = nextTurn(t, turns, starts, true)
	if res := callTool(t, tr, executor.PlatformToolCall{Name: "bash", Input: bash("echo from the hands")}); res.IsError {
		t.Fatalf("bash: %+v", res)
	}
	if err := tr.Send(ctx, ma.Event{Type: ma.EventAgentCustomToolUse, Name: "lookup", Input: json.RawMessage(`{"city":"Paris"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tr.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	evs := st.until(isIdle)
	if r := evs[len(evs)-1].StopReason; r == nil || r.Type != "requires_action" || len(r.EventIDs) != 1 {
		t.Fatalf("idle %+v", r)
	}
	s.send(t, sessID, anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
		CustomToolUseID: evs[len(evs)-1].StopReason.EventIDs[0],
		Content:         []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "sunny"}}},
	}})
	tr = nextTurn(t, turns, starts, true)
	if !slices.ContainsFunc(tr.Start.Transcript, func(raw json.RawMessage) bool { return strings.Contains(string(raw), "from the hands") }) {
		t.Fatal("the transcript lacks the tool result")
	}
	if err := tr.Send(ctx, agentMessage("it is sunny")); err != nil {
		t.Fatal(err)
	}
	if err := tr.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, st)

	// An interrupt mid-turn.
	s.send(t, sessID, userMessage("long task"))
	tr = nextTurn(t, turns, starts, true)
	if err := tr.Send(ctx, agentMessage("thinking hard")); err != nil {
		t.Fatal(err)
	}
	s.send(t, sessID, interruptEvent())
	waitIdle(t, st)
	s.send(t, sessID, userMessage("after the interrupt"))
	tr = nextTurn(t, turns, starts, true)
	if err := tr.Send(ctx, agentMessage("first half")); err != nil {
		t.Fatal(err)
	}

	// The agent end is lost mid-turn: the new connection gets the
	// transcript whole, then deltas.
	noRefusal(t, refused)
	stop()
	st.until(func(f frame) bool { return f.Type == ma.EventStatusRescheduled })
	turns, starts, refused, _ = deltaAgentEnd(t, s, token, "brain-2", executor.DefaultTranscriptCache)
	tr = nextTurn(t, turns, starts, false)
	if err := tr.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, st)
	s.send(t, sessID, userMessage("again"))
	tr = nextTurn(t, turns, starts, true)
	if err := tr.EndTurn(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, st)
	noRefusal(t, refused)
}

// noRefusal fails the test if an agent end refused a delta.
func noRefusal(t *testing.T, refused <-chan string) {
	t.Helper()
	select {
	case id := <-refused:
		t.Fatalf("transcript_unavailable for %s", id)
	default:
	}
}

// TestAgentEndTranscriptEvicted: an agent end that keeps one session's
// transcript serves two sessions in turn: the delta of the session it
// evicted is refused (transcript_unavailable) and sent again whole at
// once, with no session.error; the next turn is a delta again.
func TestAgentEndTranscriptEvicted(t *testing.T) {
	s := start(t, options{})
	envID, _ := s.selfHosted(t, "brains")
	a := s.newAgent(t, "scripted")
	sessA, token := agentEndSessionIn(t, s, a, envID)
	sessB, _ := agentEndSessionIn(t, s, a, envID)
	turns, starts, refused, _ := deltaAgentEnd(t, s, token, "brain", 1)
	ctx := context.Background()
	turn := func(sessID, text string, delta bool) {
		t.Helper()
		st := s.openStream(t, sessID)
		s.send(t, sessID, userMessage(text))
		tr := nextTurn(t, turns, starts, delta)
		if tr.Start.SessionID != sessID {
			t.Fatalf("turn of %s, want %s", tr.Start.SessionID, sessID)
		}
		if err := tr.Send(ctx, agentMessage("ok: "+text)); err != nil {
			t.Fatal(err)
		}
		if err := tr.EndTurn(ctx); err != nil {
			t.Fatal(err)
		}
		if r := waitIdle(t, st); r == nil || r.Type != ma.StopEndTurn {
			t.Fatalf("idle %+v", r)
		}
	}
	turn(sessA, "a1", false)
	turn(sessA, "a2", true)
	turn(sessB, "b1", false) // evicts sessA's transcript
	turn(sessA, "a3", false) // its delta refused, then sent whole
	if id := within(t, refused, "transcript_unavailable"); id != sessA {
		t.Fatalf("transcript_unavailable for %s, want %s", id, sessA)
	}
	turn(sessA, "a4", true)
	_, evs := agentMessages(t, s, sessA)
	if slices.ContainsFunc(evs, func(ev ma.Event) bool { return ev.Type == ma.EventSessionError }) {
		t.Fatal("a refused delta recorded a session.error")
	}
}
