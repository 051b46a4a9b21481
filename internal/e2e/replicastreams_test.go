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
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// ownerOf returns the replica whose runner holds the session's lease, and
// another one.
func ownerOf(t *testing.T, sessionID string, replicas map[string]*server) (owner, other *server) {
	t.Helper()
	var any *server
	for _, s := range replicas {
		any = s
	}
	l, err := any.app.Store.SessionLease(context.Background(), sessionID)
	if err != nil || !l.Live {
		t.Fatalf("lease %+v, %v: the session runs nowhere", l, err)
	}
	for name, s := range replicas {
		if name == l.Owner {
			owner = s
		} else {
			other = s
		}
	}
	if owner == nil || other == nil {
		t.Fatalf("lease owner %q is none of the replicas", l.Owner)
	}
	return owner, other
}

// timedFrame is a stream's frame and when the test got it.
type timedFrame struct {
	frame
	at time.Time
}

// collect reads each stream, on its own goroutine, until its session went
// idle, timing each frame as it arrives.
func collect(t *testing.T, streams ...*stream) [][]timedFrame {
	t.Helper()
	out := make([][]timedFrame, len(streams))
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, st := range streams {
		wg.Go(func() {
			deadline := time.After(30 * time.Second)
			for {
				select {
				case f, ok := <-st.ch:
					if !ok {
						errs[i] = fmt.Errorf("stream %d ended: %v", i, <-st.errc)
						return
					}
					out[i] = append(out[i], timedFrame{f, time.Now()})
					if isIdle(f) {
						return
					}
				case <-deadline:
					errs[i] = fmt.Errorf("stream %d: no idle after %d frames", i, len(out[i]))
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkPreviews fails unless a stream's frames hold the previews of the
// turn's one agent.message in order: after span.model_request_start, one
// event_start, deltas that add up to the final text, none after it. It
// returns the deltas' frames.
func checkPreviews(t *testing.T, where string, got []timedFrame) []timedFrame {
	t.Helper()
	var order []string
	var startID, text string
	var deltas []timedFrame
	var final *ma.Event
	for _, f := range got {
		order = append(order, f.Type)
		switch f.Type {
		case "event_start":
			if startID != "" {
				t.Fatalf("%s: a second event_start %+v", where, f.Started)
			}
			startID = f.Started.ID
		case "event_delta":
			if f.EventID != startID || final != nil {
				t.Fatalf("%s: delta for %s (started %q, final %v)", where, f.EventID, startID, final != nil)
			}
			text += f.Delta.Content.Text
			deltas = append(deltas, f)
		case ma.EventAgentMessage:
			final = &f.Event
		}
	}
	if startID == "" || final == nil || final.ID != startID {
		t.Fatalf("%s: preview id %q, final agent.message %v; frames %v", where, startID, final != nil, order)
	}
	if text != final.Content[0].Text {
		t.Fatalf("%s: deltas %q, final %q", where, text, final.Content[0].Text)
	}
	if slices.Index(order, ma.EventSpanModelRequestStart) > slices.Index(order, "event_start") {
		t.Fatalf("%s: order %v", where, order)
	}
	return deltas
}

// TestReplicaStreamsPreviewsOfTurnElsewhere streams a session from both
// replicas while one runs its turn: the stream on the other replica gets
// the previews of the model's answer too, in order (after the span that
// produced them, before the final message), and how much later than the
// owner's own stream is logged.
func TestReplicaStreamsPreviewsOfTurnElsewhere(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	replicas := map[string]*server{
		"replica-a": startReplica(t, dsn, "replica-a", calls),
		"replica-b": startReplica(t, dsn, "replica-b", calls),
	}
	a, b := replicas["replica-a"], replicas["replica-b"]
	agent := a.newAgent(t, "scripted")
	sess := a.newSession(t, agent.ID, a.newEnv(t, "env").ID)
	onA, onB := a.openStream(t, sess.ID, "agent.message"), b.openStream(t, sess.ID, "agent.message")
	// A first turn settles which replica runs the session (its runner
	// lingers with the lease) and that both streams are open.
	a.send(t, sess.ID, userMessage("hello"))
	collect(t, onA, onB)
	owner, _ := ownerOf(t, sess.ID, replicas)
	local, remote := onA, onB
	if owner == b {
		local, remote = onB, onA
	}
	words := make([]string, 40)
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i)
	}
	owner.send(t, sess.ID, userMessage("@pace 10ms\n@text "+strings.Join(words, " ")))
	got := collect(t, local, remote)
	here := checkPreviews(t, "owner's stream", got[0])
	there := checkPreviews(t, "other replica's stream", got[1])
	if len(there) < len(words) {
		t.Fatalf("the other replica's stream got %d deltas of %d", len(there), len(words))
	}
	// How much later a delta reaches the other replica's stream.
	var lags []time.Duration
	for i := range min(len(here), len(there)) {
		if here[i].Delta.Content.Text == there[i].Delta.Content.Text {
			lags = append(lags, there[i].at.Sub(here[i].at))
		}
	}
	slices.Sort(lags)
	if len(lags) == 0 {
		t.Fatal("no delta matched")
	}
	t.Logf("a delta reaches the other replica's stream later by: median %v, p90 %v, max %v (%d deltas)",
		lags[len(lags)/2], lags[len(lags)*9/10], lags[len(lags)-1], len(lags))
}

// releases is a tool.Placer that records when each session was
// released (its runner left).
type releases struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (r *releases) RunTool(context.Context, *ma.Session, tool.Call) tool.Result {
	return tool.Result{Content: []ma.ContentBlock{{Type: "text", Text: "ok"}}}
}
func (r *releases) Place(context.Context, *ma.Session) (*tool.Wait, error) { return nil, nil }
func (r *releases) Idle(string)                                            {}
func (r *releases) Release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.at[id]; !ok {
		r.at[id] = time.Now()
	}
}

// waitRelease waits up to d for id's release and returns when it was.
func (r *releases) waitRelease(id string, d time.Duration) (time.Time, bool) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		at, ok := r.at[id]
		r.mu.Unlock()
		if ok {
			return at, true
		}
	}
	return time.Time{}, false
}

// TestReplicaEndReachesOwner archives one session and deletes another
// through the replica that does not run them: the owner's lingering
// runners leave at once (releasing what they hold), not at the end of
// their linger.
func TestReplicaEndReachesOwner(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	const linger = time.Minute
	replicas := map[string]*server{}
	rel := map[*server]*releases{}
	for _, name := range []string{"replica-a", "replica-b"} {
		r := &releases{at: map[string]time.Time{}}
		s := startWith(t, options{models: model.Router{"scripted": calls}, tools: r}, func(c *app.Config) {
			c.DatabaseURL, c.ReplicaID, c.LeaseTTL, c.IdleLinger = dsn, name, replicaTTL, linger
		})
		replicas[name], rel[s] = s, r
	}
	a := replicas["replica-a"]
	agent := a.newAgent(t, "scripted")
	env := a.newEnv(t, "env")
	for _, end := range []string{"archive", "delete"} {
		sess := a.newSession(t, agent.ID, env.ID)
		st := a.openStream(t, sess.ID)
		a.send(t, sess.ID, userMessage("hello"))
		st.until(isIdle)
		owner, other := ownerOf(t, sess.ID, replicas)
		if _, ok := rel[owner].waitRelease(sess.ID, 0); ok {
			t.Fatalf("%s: the runner left before its linger", end)
		}
		ended := time.Now()
		var err error
		if end == "archive" {
			_, err = other.client.Beta.Sessions.Archive(context.Background(), sess.ID, anthropic.BetaSessionArchiveParams{})
		} else {
			_, err = other.client.Beta.Sessions.Delete(context.Background(), sess.ID, anthropic.BetaSessionDeleteParams{})
		}
		if err != nil {
			t.Fatal(err)
		}
		at, ok := rel[owner].waitRelease(sess.ID, 10*time.Second)
		if !ok {
			t.Fatalf("%s on the other replica: the owner's runner still lingers after 10s (linger %v)", end, linger)
		}
		t.Logf("%s on the other replica: the owner's runner left %v later", end, at.Sub(ended))
	}
}
