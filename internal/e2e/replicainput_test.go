package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestReplicaInputAnsweredOnce runs five sessions on one of three
// replicas (the one whose runner holds each session's lease after a first
// turn) and sends each four more messages, alternately through the two
// others, each right after the last was acknowledged, while the session's
// turns (model calls of 0.8 s) run and are streamed on the first. Every
// acknowledged message is answered exactly once, in order: a turn of its
// own, one model call, one agent.message naming it.
func TestReplicaInputAnsweredOnce(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	rs := map[string]*server{}
	for i := range 3 {
		id := fmt.Sprintf("replica-%d", i)
		rs[id] = startReplica(t, dsn, id, calls)
	}
	first := rs["replica-0"]
	agent := first.newAgent(t, "scripted")
	env := first.newEnv(t, "env")
	const n, msgs = 5, 4
	t.Run("sessions", func(t *testing.T) {
		for i := range n {
			sid := first.newSession(t, agent.ID, env.ID).ID
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				checkInputAnswered(t, rs, calls, sid, msgs)
			})
		}
	})
}

// checkInputAnswered sends a session a first message and waits for its
// answer, then sends msgs more alternately through the replicas that do
// not run it, and checks that each is answered once, in order.
func checkInputAnswered(t *testing.T, rs map[string]*server, calls *callCounter, sid string, msgs int) {
	first := rs["replica-0"]
	st := first.openStream(t, sid)
	first.send(t, sid, userMessage("@text answer 0"))
	st.until(isIdle)
	l, err := first.app.Store.SessionLease(context.Background(), sid)
	if err != nil || !l.Live {
		t.Fatalf("session %s: lease %+v, %v: no runner lingers after its turn", sid, l, err)
	}
	runner := rs[l.Owner]
	var senders []*server
	for id, s := range rs {
		if id != l.Owner {
			senders = append(senders, s)
		}
	}
	stream := runner.openStream(t, sid)
	for k := 1; k <= msgs; k++ {
		senders[k%2].send(t, sid, userMessage(fmt.Sprintf("@sleep 800ms\n@text answer %d", k)))
	}
	// Settled: idle, with no message left queued.
	var entries []store.Entry
	pollUntil(t, 30*time.Second, "session "+sid+" idle with nothing queued", func() bool {
		entries = logOf(t, runner.app.Store, sid)
		live := map[string]bool{}
		for _, e := range entries {
			if e.Event.Type == ma.EventUserMessage {
				live[e.Event.ID] = e.Event.ProcessedAt == nil
			}
		}
		return entries[len(entries)-1].Event.Type == ma.EventStatusIdle && !slices.Contains(slices.Collect(maps.Values(live)), true)
	})
	// The stream on the runner saw each answer.
	var streamed []string
	for len(streamed) < len(agentTexts(entries))-1 {
		if f := stream.next(10 * time.Second); f.Type == ma.EventAgentMessage {
			streamed = append(streamed, f.Content[0].Text)
		}
	}
	if want := agentTexts(entries)[1:]; !slices.Equal(streamed, want) {
		t.Errorf("session %s: the stream on %s saw %q, the log has %q", sid, l.Owner, streamed, want)
	}
	checkLog(t, sid, entries)
	var want []string
	for k := range msgs + 1 {
		want = append(want, fmt.Sprintf("answer %d", k))
	}
	if got := agentTexts(entries); !slices.Equal(got, want) {
		t.Errorf("session %s: answers %q, want %q", sid, got, want)
	}
	if got, want := calls.of(sid), slices.Repeat([]int{1}, msgs+1); !slices.Equal(got, want) {
		t.Errorf("session %s: model calls %v, want %v", sid, got, want)
	}
	if got := turnsEnded(entries); got != msgs+1 {
		t.Errorf("session %s: %d turns ended for %d messages", sid, got, msgs+1)
	}
}

// agentTexts returns the texts of a log's agent.message events.
func agentTexts(entries []store.Entry) []string {
	var out []string
	for _, e := range entries {
		if e.Event.Type == ma.EventAgentMessage {
			out = append(out, e.Event.Content[0].Text)
		}
	}
	return out
}
