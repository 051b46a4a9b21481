package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
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

func (s *memSink) grant(reason string) (TokenGrant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unavailable {
		return TokenGrant{}, WithReason(CodeResourceUnavailable, reason, "")
	}
	return TokenGrant{Token: "tok", ExpiresAt: time.Now().Add(time.Minute)}, nil
}

func (s *memSink) RefreshModelToken(context.Context) (TokenGrant, error) {
	return s.grant(ReasonModelTokenUnavailable)
}

func (s *memSink) RefreshToolsToken(context.Context) (TokenGrant, error) {
	return s.grant(ReasonToolsTokenUnavailable)
}

func (s *memSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// agentClient starts a machine-scoped agent end running handler.
func (f *fixture) agentClient(name string, handler AgentHandlerFunc) *Client {
	return f.client(Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: []string{CapabilityAgent},
		Executor: ExecutorInfo{Name: name}, Agent: handler})
}

func (f *fixture) startTurn(sessionID string, sink TurnSink) *AgentTurn {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		changed := f.hub.ChangedMachine("machine_1")
		t, err := f.hub.StartTurn(ctx, AgentTurnRequest{MachineIDs: []string{"machine_1"}, Start: TurnStart{SessionID: sessionID}, Sink: sink})
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
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeConflict {
		return fmt.Errorf("err = %v, want -32013 conflict", err)
	}
	if n, ok := re.ExpectedSequence(); !ok || n != expected {
		return fmt.Errorf("expected_sequence = %d %v, want %d", n, ok, expected)
	}
	return nil
}

func wantReason(t *testing.T, err error, code int, reason string) {
	t.Helper()
	var re *RPCError
	if !errors.As(err, &re) || re.Code != code || re.Reason() != reason {
		t.Fatalf("err = %v, want %d with reason %s", err, code, reason)
	}
}

// TestAgentSessionEventSequence: a gap and a replay are -32013 with the
// sequence the harness expects next, and nothing is appended for them.
func TestAgentSessionEventSequence(t *testing.T) {
	f := newFixture(t, HubOptions{})
	results := make(chan error, 1)
	f.agentClient("brain", func(ctx context.Context, tr *Turn) error {
		results <- func() error {
			if err := tr.Send(ctx, map[string]string{"type": "agent.message", "n": "0"}); err != nil {
				return err
			}
			raw := func(seq int64) error {
				return tr.conn.call(ctx, MethodSessionEvent, sessionEventParams{SessionID: tr.Start.SessionID, TurnID: tr.Start.TurnID,
					Sequence: seq, Events: []json.RawMessage{json.RawMessage(`{"type":"agent.message","n":"dup"}`)}}, nil)
			}
			if err := conflict(raw(5), 1); err != nil { // a gap
				return err
			}
			if err := conflict(raw(0), 1); err != nil { // a replay
				return err
			}
			tr.next = 0 // Send resynchronises from expected_sequence
			if err := conflict(tr.Send(ctx, map[string]string{"type": "agent.message", "n": "stale"}), 1); err != nil {
				return err
			}
			if err := tr.Send(ctx, map[string]string{"type": "agent.message", "n": "1"}, map[string]string{"type": "agent.message", "n": "2"}); err != nil {
				return err
			}
			return tr.EndTurn(ctx)
		}()
		return nil
	})
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
	turns := make(chan *Turn, 1)
	f.agentClient("brain", func(ctx context.Context, tr *Turn) error {
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
	wantReason(t, err, CodeResourceUnavailable, ReasonModelTokenUnavailable)
	_, err = tr.RefreshToolsToken(ctx)
	wantReason(t, err, CodeResourceUnavailable, ReasonToolsTokenUnavailable)

	// Another agent end asking for this turn.
	other := f.client(Options{EnvironmentKey: f.envKey, Sessions: &testSessions{}, Capabilities: []string{CapabilityAgent}, Executor: ExecutorInfo{Name: "other"}})
	for _, m := range []string{MethodModelTokenRefresh, MethodToolsTokenRefresh} {
		for err = ErrNotConnected; errors.Is(err, ErrNotConnected); time.Sleep(5 * time.Millisecond) {
			err = other.Call(ctx, m, tokenRefreshParams{SessionID: "sess_1", TurnID: tr.Start.TurnID}, nil)
		}
		wantReason(t, err, CodeForbidden, ReasonForbidden)
	}

	ht.End()
	_, err = tr.RefreshModelToken(ctx)
	wantReason(t, err, CodeSessionNotActive, ReasonTurnInactive)
	_, err = tr.RefreshToolsToken(ctx)
	wantReason(t, err, CodeSessionNotActive, ReasonTurnInactive)
	err = tr.Send(ctx, map[string]string{"type": "agent.message"})
	wantReason(t, err, CodeSessionNotActive, ReasonTurnInactive)
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
	c := f.agentClient("brain", func(ctx context.Context, tr *Turn) error {
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
	if _, err := f.hub.StartTurn(ctx, AgentTurnRequest{MachineIDs: []string{"machine_1"}, Start: TurnStart{SessionID: "s"}, Sink: &memSink{}}); !errors.Is(err, ErrNoAgentEnd) {
		t.Fatalf("StartTurn without an agent end = %v", err)
	}
}

// TestTurnStartWithoutAgentHandler: an executor without Options.Agent
// refuses turn.start with -32012 (capability agent).
func TestTurnStartWithoutAgentHandler(t *testing.T) {
	f := newFixture(t, HubOptions{})
	f.client(Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: []string{CapabilityAgent}, Executor: ExecutorInfo{Name: "no-handler"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		changed := f.hub.ChangedMachine("machine_1")
		_, err := f.hub.StartTurn(ctx, AgentTurnRequest{MachineIDs: []string{"machine_1"}, Start: TurnStart{SessionID: "s"}, Sink: &memSink{}})
		if errors.Is(err, ErrNoAgentEnd) {
			<-changed
			continue
		}
		var re *RPCError
		if !errors.As(err, &re) || re.Code != CodeCapabilityUnavailable || re.Data.Capability != CapabilityAgent {
			t.Fatalf("StartTurn = %v, want -32012 capability agent", err)
		}
		return
	}
}
