// Command agentend is a minimal agent end ("brain") for reins: an external
// agent loop that runs the turns of sessions whose metadata has
// "reins.agent_end": "true". It answers each user message by echoing it,
// after an agent.thinking event and an optional delay (to watch
// interrupts and failover).
//
//	REINS_MACHINE_TOKEN=reins_mt_… go run ./examples/agentend -url http://127.0.0.1:8080
//
// A real loop would call a model where this one echoes; reins's model
// gateway and platform tools endpoint, which would give it a model and the
// session's tools without their keys, are not built yet.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/reinsdev/reins/executor"
	ma "github.com/reinsdev/reins/managedagents"
)

func main() {
	url := flag.String("url", os.Getenv("REINS_URL"), "reins server URL (env REINS_URL)")
	name := flag.String("name", "echo-brain", "this agent end's name (one connection per name)")
	delay := flag.Duration("delay", 0, "wait this long before answering")
	flag.Parse()
	token := os.Getenv("REINS_MACHINE_TOKEN")
	if *url == "" || token == "" {
		fmt.Fprintln(os.Stderr, "agentend: -url and REINS_MACHINE_TOKEN are required")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := executor.NewClient(executor.Options{
		URL: *url, MachineToken: token, Executor: executor.ExecutorInfo{Name: *name},
		Capabilities: []string{executor.CapabilityAgent},
		Agent:        executor.AgentHandlerFunc(func(ctx context.Context, t *executor.Turn) error { return echo(ctx, t, *delay) }),
		Logger:       log,
	})
	if err := c.Run(ctx); err != nil && !errors.Is(err, executor.ErrClientStopped) {
		log.Error("agent end stopped", "err", err)
		os.Exit(1)
	}
}

// echo runs one turn: it thinks, waits, and answers with the user's words.
func echo(ctx context.Context, t *executor.Turn, delay time.Duration) error {
	var said []string
	for _, raw := range t.Start.Inputs {
		var ev ma.Event
		if err := json.Unmarshal(raw, &ev); err != nil || ev.Type != ma.EventUserMessage {
			continue
		}
		for _, b := range ev.Content {
			if b.Type == "text" {
				said = append(said, b.Text)
			}
		}
	}
	if err := t.Send(ctx, ma.Event{Type: ma.EventAgentThinking}); err != nil {
		return err
	}
	select {
	case <-time.After(delay):
	case <-ctx.Done(): // interrupted, or the connection was lost
		return ctx.Err()
	}
	answer := ma.Event{Type: ma.EventAgentMessage, Content: []ma.ContentBlock{{Type: "text", Text: "You said: " + strings.Join(said, " ")}}}
	if err := t.Send(ctx, answer); err != nil {
		return err
	}
	return t.EndTurn(ctx)
}
