package executorhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
)

// raws makes events {"id":…} of the ids.
func raws(ids ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		out[i] = json.RawMessage(fmt.Sprintf(`{"id":%q,"type":"agent.message"}`, id))
	}
	return out
}

func rawStrings(rs []json.RawMessage) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// seen is what a handler saw of a turn.start.
type seen struct {
	transcript   []string
	since, base  string
	inputsLength int
}

// deltaFixture runs an agent end keeping cache sessions' transcripts
// that reports what its handler sees and the client's turn events.
func deltaFixture(t *testing.T, cache int) (*fixture, <-chan seen, <-chan executor.Event) {
	f := newFixture(t, HubOptions{})
	saw, events := make(chan seen, 8), make(chan executor.Event, 16)
	f.client(executor.Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: []string{executor.CapabilityAgent},
		Executor: executor.ExecutorInfo{Name: "brain"}, TranscriptCache: cache,
		OnEvent: func(e executor.Event) {
			if e.Type == executor.EventTurnStarted || e.Type == executor.EventTranscriptUnavailable {
				events <- e
			}
		},
		Agent: executor.AgentHandlerFunc(func(ctx context.Context, tr *executor.Turn) error {
			saw <- seen{rawStrings(tr.Start.Transcript), tr.Start.TranscriptSince, tr.Start.TranscriptBase, len(tr.Start.Inputs)}
			return nil
		})})
	return f, saw, events
}

// startTurnReq starts req's turn, waiting for the agent end to register.
func (f *fixture) startTurnReq(req AgentTurnRequest) *AgentTurn {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req.MachineIDs, req.Sink = []string{"machine_1"}, &memSink{}
	for {
		changed := f.hub.ChangedMachine("machine_1")
		t, err := f.hub.StartTurn(ctx, req)
		if errors.Is(err, ErrNoAgentEnd) {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				f.t.Fatal("no agent end registered")
			}
		}
		if err != nil {
			f.t.Fatal(err)
		}
		t.End()
		return t
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing within 10 s")
		var zero T
		return zero
	}
}

// TestAgentTranscriptDeltas: an agent end that keeps transcripts gets a
// delta when the turn goes to the connection that holds the transcript
// it continues, and its handler sees the whole transcript rebuilt; a
// delta over a transcript it no longer holds (evicted, another base) is
// refused with transcript_unavailable and sent again whole at once; a
// delta for another connection is not used.
func TestAgentTranscriptDeltas(t *testing.T) {
	f, saw, events := deltaFixture(t, 1)
	check := func(want []string, delta bool, refused bool) {
		t.Helper()
		if refused {
			if e := recv(t, events); e.Type != executor.EventTranscriptUnavailable {
				t.Fatalf("event %+v, want transcript_unavailable", e)
			}
		}
		if e := recv(t, events); e.Type != executor.EventTurnStarted || e.Delta != delta {
			t.Fatalf("event %+v, want a turn started with delta %v", e, delta)
		}
		s := recv(t, saw)
		if !slices.Equal(s.transcript, want) || s.since != "" || s.base != "" || s.inputsLength != 1 {
			t.Fatalf("handler saw %+v, want transcript %q", s, want)
		}
	}
	t1 := f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_1", Transcript: raws("e1", "e2"), Inputs: raws("i1")}})
	if t1.TranscriptHolder() != t1.ExecutorID {
		t.Fatalf("holder %q, executor %q", t1.TranscriptHolder(), t1.ExecutorID)
	}
	check(rawStrings(raws("e1", "e2")), false, false)

	// The delta continues turn_1's transcript and inputs after i1.
	full := raws("e1", "e2", "i1", "e3")
	f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_2", Transcript: full, Inputs: raws("i2")},
		Delta: &TranscriptDelta{ExecutorID: t1.ExecutorID, Base: "turn_1", Since: "i1", Events: raws("e3")}})
	check(rawStrings(full), true, false)

	// Cut inside what it holds: e2 is kept, the rest replaced.
	full = raws("e1", "e2", "x1")
	f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_3", Transcript: full, Inputs: raws("i3")},
		Delta: &TranscriptDelta{ExecutorID: t1.ExecutorID, Base: "turn_2", Since: "e2", Events: raws("x1")}})
	check(rawStrings(full), true, false)

	// Another base than the one it holds: refused, sent again whole.
	full = raws("e1", "e2", "x1", "i3")
	f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_4", Transcript: full, Inputs: raws("i4")},
		Delta: &TranscriptDelta{ExecutorID: t1.ExecutorID, Base: "turn_2", Since: "e2", Events: raws("x1", "i3")}})
	check(rawStrings(full), false, true)

	// sess_b evicts sess_a (a cache of one session): the next delta of
	// sess_a is refused and sent again whole.
	f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_b", TurnID: "turn_b1", Transcript: raws("b1"), Inputs: raws("bi1")}})
	check(rawStrings(raws("b1")), false, false)
	full = raws("e1", "e2", "x1", "i3", "i4")
	f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_5", Transcript: full, Inputs: raws("i5")},
		Delta: &TranscriptDelta{ExecutorID: t1.ExecutorID, Base: "turn_4", Since: "i4", Events: nil}})
	check(rawStrings(full), false, true)

	// A delta held by another connection is not sent.
	full = raws("e1", "e2", "x1", "i3", "i4", "i5")
	f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_6", Transcript: full, Inputs: raws("i6")},
		Delta: &TranscriptDelta{ExecutorID: "exec_other", Base: "turn_5", Since: "i5"}})
	check(rawStrings(full), false, false)
}

// TestAgentTranscriptDeltasOff: an agent end that keeps no transcripts
// (it does not declare transcript_deltas) always gets the whole
// transcript and holds none.
func TestAgentTranscriptDeltasOff(t *testing.T) {
	f, saw, _ := deltaFixture(t, -1)
	t1 := f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_1", Transcript: raws("e1"), Inputs: raws("i1")}})
	if t1.TranscriptHolder() != "" {
		t.Fatalf("holder %q for an agent end without transcript_deltas", t1.TranscriptHolder())
	}
	recv(t, saw)
	full := raws("e1", "i1", "e2")
	f.startTurnReq(AgentTurnRequest{Start: executor.TurnStart{SessionID: "sess_a", TurnID: "turn_2", Transcript: full, Inputs: raws("i2")},
		Delta: &TranscriptDelta{ExecutorID: t1.ExecutorID, Base: "turn_1", Since: "i1", Events: raws("e2")}})
	if s := recv(t, saw); !slices.Equal(s.transcript, rawStrings(full)) || s.since != "" {
		t.Fatalf("handler saw %+v", s)
	}
}
