package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/executorhub"
)

// endSink is the harness's side of a benchmark turn: it notes the end of
// the turn (the appends themselves cost nothing here).
type endSink struct{ ended chan struct{} }

func (s endSink) Append(_ context.Context, events []json.RawMessage) error {
	if bytes.Contains(events[len(events)-1], []byte(`"turn.end"`)) {
		close(s.ended)
	}
	return nil
}

func (endSink) RefreshModelToken(context.Context) (executor.TokenGrant, error) {
	return executor.TokenGrant{}, errors.New("no gateway")
}

func (endSink) RefreshToolsToken(context.Context) (executor.TokenGrant, error) {
	return executor.TokenGrant{}, errors.New("no tools endpoint")
}

// benchAnswer is the agent end's whole turn: one agent.message and the end
// of the turn, in one session.event.
var benchAnswer = map[string]any{"type": "agent.message", "content": []map[string]string{{"type": "text", "text": "ok"}}}

// startAgentEnd connects an agent end that answers every turn at once.
func startAgentEnd(url, key string, hub *executorhub.Hub) *executor.Client {
	c := executor.NewClient(executor.Options{
		URL: url, EnvironmentKey: key, Executor: executor.ExecutorInfo{Name: "bench-brain"},
		Sessions: noopSessions{}, Capabilities: []string{executor.CapabilityAgent},
		Agent: executor.AgentHandlerFunc(func(ctx context.Context, t *executor.Turn) error {
			return t.Send(ctx, benchAnswer, map[string]string{"type": executor.EventTurnEnd})
		}),
	})
	go c.Run(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ch := hub.Changed("env_bench")
		if _, err := agentTurn(ctx, hub); err == nil {
			return c
		} else if !errors.Is(err, executorhub.ErrNoAgentEnd) {
			log.Fatal(err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			log.Fatal("agent end did not register")
		}
	}
}

// agentTurn runs one turn on the agent end: turn.start → session.event →
// the end of the turn seen by the harness's sink.
func agentTurn(ctx context.Context, hub *executorhub.Hub) (time.Duration, error) {
	sink := endSink{ended: make(chan struct{})}
	start := time.Now()
	t, err := hub.StartTurn(ctx, executorhub.AgentTurnRequest{EnvironmentID: "env_bench", Start: executor.TurnStart{SessionID: "sess_bench_agent"}, Sink: sink})
	if err != nil {
		return 0, err
	}
	defer t.End()
	select {
	case <-sink.ended:
		return time.Since(start), nil
	case <-t.Done():
		return 0, t.Err()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// agentTurns measures n sequential agent-end turns.
func agentTurns(hub *executorhub.Hub, n int) latency {
	d := make([]time.Duration, 0, n)
	for range n {
		took, err := agentTurn(context.Background(), hub)
		if err != nil {
			log.Fatal(err)
		}
		d = append(d, took)
	}
	return percentiles(d)
}
