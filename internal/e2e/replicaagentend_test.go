package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/model"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
	"github.com/reinsdev/reins/internal/pgtest"
	ma "github.com/reinsdev/reins/managedagents"
)

// echoTurn is an agent end's handler: one agent.message echoing the
// user's, then the end of the turn.
func echoTurn(ctx context.Context, tr *executor.Turn) error {
	if err := tr.Send(ctx, agentMessage("echo: "+inputText(tr))); err != nil {
		return err
	}
	return tr.EndTurn(ctx)
}

// agentEndOn connects an agent end running handler to s, the replica
// named replica, with a machine token (key "") or an environment key, and
// waits until s announces it for the environment.
func agentEndOn(t *testing.T, s *server, replica, envID, token, key string, handler executor.AgentHandlerFunc) {
	t.Helper()
	agentEndWith(t, s, token, "brain-on-"+replica, handler, func(o *executor.Options) {
		if key != "" {
			o.MachineToken, o.EnvironmentKey = "", key
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		there, err := s.app.Store.ReplicasWithHands(context.Background(), "agent:"+envID)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(there, replica) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not announce the agent end of %s: %v", replica, envID, there)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkEchoTurn fails unless evs end an agent-end turn that echoed text.
func checkEchoTurn(t *testing.T, evs []frame, text string) {
	t.Helper()
	i := slices.IndexFunc(evs, func(f frame) bool { return f.Type == ma.EventAgentMessage })
	if i < 0 || evs[i].Content[0].Text != "echo: "+text {
		t.Fatalf("events %v: no echo of %q", types(evs), text)
	}
	if last := evs[len(evs)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("idle = %+v", last.StopReason)
	}
	if slices.ContainsFunc(evs, func(f frame) bool { return f.Type == ma.EventSessionError }) {
		t.Fatalf("session error: %v", types(evs))
	}
}

// TestReplicaAgentEndOnAnotherReplica connects an agent end to replica A
// only (with a machine token scoped to the session's environment, or with
// the environment's key) and sends turns through B. A turn whose runner
// starts on B, which has no agent end, moves to A, which announced one,
// and runs on A's agent end: sessions are sent turns until one has been
// handed over (its lease's token grows by the hand-over and A's taking
// it), and every turn completes.
func TestReplicaAgentEndOnAnotherReplica(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	a, b := startReplica(t, dsn, "replica-a", calls), startReplica(t, dsn, "replica-b", calls)
	agent := b.newAgent(t, "scripted")
	for _, how := range []string{"machine token", "environment key"} {
		t.Run(how, func(t *testing.T) {
			envID, key := b.selfHosted(t, "brains "+how)
			sessID, token := agentEndSessionIn(t, b, agent, envID)
			if how == "machine token" {
				key = ""
			}
			agentEndOn(t, a, "replica-a", envID, token, key, echoTurn)
			for i := 0; ; i++ {
				if i > 0 {
					sessID = newAgentEndSession(t, b, agent.ID, envID)
				}
				st := b.openStream(t, sessID)
				began := time.Now()
				text := fmt.Sprintf("hello %s %d", how, i)
				b.send(t, sessID, userMessage(text))
				checkEchoTurn(t, st.until(isIdle), text)
				took := time.Since(began)
				st.cancel()
				l, err := a.app.Store.SessionLease(context.Background(), sessID)
				if err != nil {
					t.Fatal(err)
				}
				if l.Token > 1 {
					t.Logf("%s: the turn sent through B moved to A's agent end and ran in %v (session %d)", how, took, i)
					return
				}
				if i == 15 {
					t.Fatal("no turn started on B")
				}
			}
		})
	}
}

// newAgentEndSession creates a session of the agent in envID whose turns
// run on an agent end.
func newAgentEndSession(t *testing.T, s *server, agentID, envID string) string {
	t.Helper()
	sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)},
		EnvironmentID: envID,
		Metadata:      map[string]string{harness.AgentEndMetadataKey: "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

// TestReplicaAgentEndWaits: with no agent end anywhere, an agent-end
// session waits (rescheduling) on the replica its turn started on, without
// moving between replicas, and runs on the first agent end that connects,
// at another replica.
func TestReplicaAgentEndWaits(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	a, b := startReplica(t, dsn, "replica-a", calls), startReplica(t, dsn, "replica-b", calls)
	sessID, token := agentEndSession(t, b)
	st := b.openStream(t, sessID)
	defer st.cancel()
	b.send(t, sessID, userMessage("later"))
	st.until(func(f frame) bool { return f.Type == ma.EventStatusRescheduled })
	lease := func() string {
		t.Helper()
		l, err := b.app.Store.SessionLease(context.Background(), sessID)
		if err != nil || !l.Live {
			t.Fatalf("lease %+v, %v", l, err)
		}
		return l.Owner
	}
	owner := lease()
	time.Sleep(2 * replicaTTL) // several announcement renewals
	if got := lease(); got != owner {
		t.Fatalf("the waiting session moved from %s to %s", owner, got)
	}
	if n := countOf(logOf(t, b.app.Store, sessID), ma.EventStatusRescheduled); n != 1 {
		t.Fatalf("%d status_rescheduled events while waiting, want 1", n)
	}
	other, name := a, "replica-a"
	if owner == name {
		other, name = b, "replica-b"
	}
	began := time.Now()
	agentEndWith(t, other, token, "late-brain", echoTurn, nil)
	checkEchoTurn(t, st.until(isIdle), "later")
	t.Logf("the session waiting on %s ran on the agent end that connected to %s, %v later", owner, name, time.Since(began))
}

// TestReplicaAgentEndCallsThroughAnyReplica: three replicas on one
// database; an agent end connected to A runs the turns of a cloud
// session sent through B, and makes its model gateway call and its
// platform tool call through C, as behind a load balancer. C forwards
// both to A, which runs the turn: the model answers through C (streamed),
// bash runs in the session's sandbox, the turn ends, and the log records
// the call's span and the tool's use and result.
func TestReplicaAgentEndCallsThroughAnyReplica(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	fake := fakeanthropic.New(t)
	models := model.Router{"anthropic": provider.New(provider.Options{APIKey: "upstream-key", BaseURL: fake.URL, HTTPClient: fake.Client()})}
	rs := make([]*server, 3)
	for i := range rs {
		rs[i] = startWith(t, options{models: models}, func(c *app.Config) {
			c.DatabaseURL, c.ReplicaID, c.LeaseTTL = dsn, fmt.Sprintf("replica-%c", 'a'+i), replicaTTL
		})
	}
	a, b, c := rs[0], rs[1], rs[2]
	fake.Push(fakeanthropic.Text("through C").WithDelay(20 * time.Millisecond))
	env := b.newEnv(t, "cloud")
	var m machineView
	if _, err := call(b.url, b.key, "POST", "/v1/machines", map[string]any{"name": "brain-box", "environment_ids": []string{env.ID}}, &m); err != nil {
		t.Fatal(err)
	}
	agent := b.newAgent(t, provider.DefaultModel, toolset(false))
	sessID := newAgentEndSession(t, b, agent.ID, env.ID)
	results := make(chan error, 1)
	agentEndOn(t, a, "replica-a", env.ID, m.Token, "", func(ctx context.Context, tr *executor.Turn) error {
		err := callsThrough(ctx, tr, a.url, c.url)
		results <- err
		if err != nil {
			return tr.EndTurn(ctx)
		}
		if err := tr.Send(ctx, agentMessage("done")); err != nil {
			return err
		}
		return tr.EndTurn(ctx)
	})
	st := b.openStream(t, sessID)
	b.send(t, sessID, userMessage("work"))
	evs := st.until(isIdle)
	if err := within(t, results, "the agent end's calls"); err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn {
		t.Fatalf("idle %+v", last.StopReason)
	}
	var got []string
	for _, f := range evs {
		switch f.Type {
		case ma.EventSpanModelRequestStart, ma.EventSpanModelRequestEnd, ma.EventAgentToolUse, ma.EventAgentToolResult, ma.EventSessionError:
			got = append(got, f.Type)
		}
	}
	want := []string{ma.EventSpanModelRequestStart, ma.EventSpanModelRequestEnd, ma.EventAgentToolUse, ma.EventAgentToolResult}
	if !slices.Equal(got, want) {
		t.Fatalf("the turn's events %v, want %v", got, want)
	}
	if l, err := c.app.Store.SessionLease(context.Background(), sessID); err != nil || l.Owner != "replica-a" {
		t.Fatalf("lease %+v, %v: the turn did not run on A", l, err)
	}
}

// callsThrough makes a turn's model gateway call and a platform tool call
// at other instead of at its own replica's URL (own).
func callsThrough(ctx context.Context, tr *executor.Turn, own, other string) error {
	if tr.Start.Model == nil || tr.Start.Tools == nil {
		return fmt.Errorf("grants %+v %+v", tr.Start.Model, tr.Start.Tools)
	}
	g, tools := *tr.Start.Model, *tr.Start.Tools
	g.BaseURL = strings.Replace(g.BaseURL, own, other, 1)
	tools.URL = strings.Replace(tools.URL, own, other, 1)
	if g.BaseURL == tr.Start.Model.BaseURL || tools.URL == tr.Start.Tools.URL {
		return fmt.Errorf("grants at %s and %s, not at %s", g.BaseURL, tools.URL, own)
	}
	tr.Start.Tools = &tools
	client := anthropicClient(&g)
	stream := client.Messages.NewStreaming(ctx, hello(&g))
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return err
		}
	}
	if err := stream.Err(); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "through C" {
		return fmt.Errorf("the model through another replica: %+v, %v", msg.Content, err)
	}
	res, err := tr.CallTool(ctx, executor.PlatformToolCall{Name: "bash", Input: bash("echo via-$((40+2))"), IdempotencyKey: "via"})
	if err != nil || res.IsError || strings.TrimSpace(toolText(res)) != "via-42" {
		return fmt.Errorf("bash through another replica: %+v, %v", res, err)
	}
	return nil
}
