package executorhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
)

// memSink is a TurnSink that records what it is given.
type memSink struct {
	mu          sync.Mutex
	events      []string
	unavailable bool
}

func (s *memSink) Append(ctx context.Context, events []json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		s.events = append(s.events, string(e))
	}
	return nil
}

func (s *memSink) grant(reason string) (executor.TokenGrant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unavailable {
		return executor.TokenGrant{}, executor.WithReason(executor.CodeResourceUnavailable, reason, "")
	}
	return executor.TokenGrant{Token: "tok", ExpiresAt: time.Now().Add(time.Minute)}, nil
}

func (s *memSink) RefreshModelToken(context.Context) (executor.TokenGrant, error) {
	return s.grant(executor.ReasonModelTokenUnavailable)
}

func (s *memSink) RefreshToolsToken(context.Context) (executor.TokenGrant, error) {
	return s.grant(executor.ReasonToolsTokenUnavailable)
}

func (s *memSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// agentClient starts a machine-scoped agent end running handler.
func (f *fixture) agentClient(name string, handler executor.AgentHandlerFunc) *executor.Client {
	return f.client(executor.Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: []string{executor.CapabilityAgent},
		Executor: executor.ExecutorInfo{Name: name}, Agent: handler})
}

func (f *fixture) startTurn(sessionID string, sink TurnSink) *AgentTurn {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		changed := f.hub.ChangedMachine("machine_1")
		t, err := f.hub.StartTurn(ctx, AgentTurnRequest{MachineIDs: []string{"machine_1"}, Start: executor.TurnStart{SessionID: sessionID}, Sink: sink})
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
		return t
	}
}

// conflict checks that err is -32013 with expected_sequence expected.
func conflict(err error, expected int64) error {
	var re *executor.RPCError
	if !errors.As(err, &re) || re.Code != executor.CodeConflict {
		return fmt.Errorf("err = %v, want -32013 conflict", err)
	}
	if n, ok := re.ExpectedSequence(); !ok || n != expected {
		return fmt.Errorf("expected_sequence = %d %v, want %d", n, ok, expected)
	}
	return nil
}

func wantReason(t *testing.T, err error, code int, reason string) {
	t.Helper()
	var re *executor.RPCError
	if !errors.As(err, &re) || re.Code != code || re.Reason() != reason {
		t.Fatalf("err = %v, want %d with reason %s", err, code, reason)
	}
}

// TestAgentSessionEventSequence: a gap and a replay are -32013 with the
// sequence the harness expects next, and nothing is appended for them; a
// Send whose sequence went stale gets the same answer and resynchronises.
func TestAgentSessionEventSequence(t *testing.T) {
	f := newFixture(t, HubOptions{})
	results := make(chan error, 1)
	var client atomic.Pointer[executor.Client]
	c := f.agentClient("brain", func(ctx context.Context, tr *executor.Turn) error {
		results <- func() error {
			if err := tr.Send(ctx, map[string]string{"type": "agent.message", "n": "0"}); err != nil {
				return err
			}
			// Raw session.events on the turn's connection, past the Turn.
			raw := func(seq int64, n string) error {
				return client.Load().Call(ctx, executor.MethodSessionEvent, executor.SessionEventParams{SessionID: tr.Start.SessionID, TurnID: tr.Start.TurnID,
					Sequence: seq, Events: []json.RawMessage{json.RawMessage(`{"n":"` + n + `","type":"agent.message"}`)}}, nil)
			}
			if err := conflict(raw(5, "dup"), 1); err != nil { // a gap
				return err
			}
			if err := conflict(raw(0, "dup"), 1); err != nil { // a replay
				return err
			}
			if err := raw(1, "1"); err != nil { // the Turn's sequence goes stale
				return err
			}
			if err := conflict(tr.Send(ctx, map[string]string{"type": "agent.message", "n": "stale"}), 2); err != nil {
				return err
			}
			if err := tr.Send(ctx, map[string]string{"type": "agent.message", "n": "2"}); err != nil { // resynchronised from expected_sequence
				return err
			}
			return tr.EndTurn(ctx)
		}()
		return nil
	})
	client.Store(c)
	sink := &memSink{}
	turn := f.startTurn("sess_1", sink)
	if err := <-results; err != nil {
		t.Fatal(err)
	}
	got := sink.got()
	want := []string{`{"n":"0","type":"agent.message"}`, `{"n":"1","type":"agent.message"}`, `{"n":"2","type":"agent.message"}`, `{"type":"turn.end"}`}
	if len(got) != len(want) {
		t.Fatalf("appended %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("appended %q, want %q", got, want)
		}
	}
	if n := turn.NextSequence(); n != 4 {
		t.Fatalf("next sequence %d, want 4", n)
	}
}

// TestAgentTokenRefresh: refreshes during the turn get a grant, or the
// seed's reasons: model_token_unavailable / tools_token_unavailable when
// none can be issued, turn_inactive after the turn ended, forbidden from
// another agent end.
func TestAgentTokenRefresh(t *testing.T) {
	f := newFixture(t, HubOptions{})
	turns := make(chan *executor.Turn, 1)
	f.agentClient("brain", func(ctx context.Context, tr *executor.Turn) error {
		turns <- tr
		<-ctx.Done()
		return nil
	})
	sink := &memSink{}
	ht := f.startTurn("sess_1", sink)
	tr := <-turns
	ctx := context.Background()
	if g, err := tr.RefreshModelToken(ctx); err != nil || g.Token != "tok" {
		t.Fatalf("model refresh = %+v %v", g, err)
	}
	if g, err := tr.RefreshToolsToken(ctx); err != nil || g.Token != "tok" {
		t.Fatalf("tools refresh = %+v %v", g, err)
	}
	sink.mu.Lock()
	sink.unavailable = true
	sink.mu.Unlock()
	_, err := tr.RefreshModelToken(ctx)
	wantReason(t, err, executor.CodeResourceUnavailable, executor.ReasonModelTokenUnavailable)
	_, err = tr.RefreshToolsToken(ctx)
	wantReason(t, err, executor.CodeResourceUnavailable, executor.ReasonToolsTokenUnavailable)

	// Another agent end asking for this turn.
	other := f.client(executor.Options{EnvironmentKey: f.envKey, Sessions: &testSessions{}, Capabilities: []string{executor.CapabilityAgent}, Executor: executor.ExecutorInfo{Name: "other"}})
	for _, m := range []string{executor.MethodModelTokenRefresh, executor.MethodToolsTokenRefresh} {
		for err = executor.ErrNotConnected; errors.Is(err, executor.ErrNotConnected); time.Sleep(5 * time.Millisecond) {
			err = other.Call(ctx, m, executor.TokenRefreshParams{SessionID: "sess_1", TurnID: tr.Start.TurnID}, nil)
		}
		wantReason(t, err, executor.CodeForbidden, executor.ReasonForbidden)
	}

	ht.End()
	_, err = tr.RefreshModelToken(ctx)
	wantReason(t, err, executor.CodeSessionNotActive, executor.ReasonTurnInactive)
	_, err = tr.RefreshToolsToken(ctx)
	wantReason(t, err, executor.CodeSessionNotActive, executor.ReasonTurnInactive)
	err = tr.Send(ctx, map[string]string{"type": "agent.message"})
	wantReason(t, err, executor.CodeSessionNotActive, executor.ReasonTurnInactive)
	if n := len(sink.got()); n != 0 {
		t.Fatalf("%d events appended after the turn ended", n)
	}
}

// TestAgentTurnCancelAndLoss: turn.cancel ends the handler's context; a
// lost agent end ends the harness's turn with ErrAgentEndLost.
func TestAgentTurnCancelAndLoss(t *testing.T) {
	f := newFixture(t, HubOptions{})
	canceled := make(chan struct{}, 2)
	started := make(chan struct{}, 2)
	c := f.agentClient("brain", func(ctx context.Context, tr *executor.Turn) error {
		started <- struct{}{}
		<-ctx.Done()
		canceled <- struct{}{}
		return nil
	})
	ht := f.startTurn("sess_1", &memSink{})
	<-started
	ht.Cancel(context.Background(), "interrupt")
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("turn.cancel did not reach the handler")
	}
	if ht.Err() != nil {
		t.Fatalf("cancelled turn Err = %v", ht.Err())
	}

	ht = f.startTurn("sess_1", &memSink{})
	<-started
	c.Stop()
	select {
	case <-ht.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not end when its agent end stopped")
	}
	if !errors.Is(ht.Err(), ErrAgentEndLost) {
		t.Fatalf("Err = %v, want ErrAgentEndLost", ht.Err())
	}
	<-canceled
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := f.hub.StartTurn(ctx, AgentTurnRequest{MachineIDs: []string{"machine_1"}, Start: executor.TurnStart{SessionID: "s"}, Sink: &memSink{}}); !errors.Is(err, ErrNoAgentEnd) {
		t.Fatalf("StartTurn without an agent end = %v", err)
	}
}

// TestTurnStartWithoutAgentHandler: an executor without Options.Agent
// refuses turn.start with -32012 (capability agent).
func TestTurnStartWithoutAgentHandler(t *testing.T) {
	f := newFixture(t, HubOptions{})
	f.client(executor.Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: []string{executor.CapabilityAgent}, Executor: executor.ExecutorInfo{Name: "no-handler"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		changed := f.hub.ChangedMachine("machine_1")
		_, err := f.hub.StartTurn(ctx, AgentTurnRequest{MachineIDs: []string{"machine_1"}, Start: executor.TurnStart{SessionID: "s"}, Sink: &memSink{}})
		if errors.Is(err, ErrNoAgentEnd) {
			<-changed
			continue
		}
		var re *executor.RPCError
		if !errors.As(err, &re) || re.Code != executor.CodeCapabilityUnavailable || re.Data.Capability != executor.CapabilityAgent {
			t.Fatalf("StartTurn = %v, want -32012 capability agent", err)
		}
		return
	}
}
