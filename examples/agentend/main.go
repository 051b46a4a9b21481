// Command agentend is an agent end ("brain") for reins: an external agent
// loop that runs the turns of sessions whose metadata has
// "reins.agent_end": "true". It calls the session's Claude model through
// reins's model gateway with the official Anthropic SDK (the model token
// of turn.start as its API key: it holds no provider key), runs the tool
// calls through the platform tools endpoint (on the session's hands), and
// appends the model's answers to the session.
//
//	REINS_MACHINE_TOKEN=reins_mt_… go run ./examples/agentend -url http://127.0.0.1:8080
//
// A turn without a model grant (a session whose model the gateway does not
// serve, such as "scripted") is answered by echoing the user, after an
// agent.thinking event.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/executor"
	ma "github.com/reinsdev/reins/managedagents"
)

func main() {
	url := flag.String("url", os.Getenv("REINS_URL"), "reins server URL (env REINS_URL)")
	name := flag.String("name", "brain", "this agent end's name (one connection per name)")
	delay := flag.Duration("delay", 0, "wait this long before answering (to watch interrupts and failover)")
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
		Agent: executor.AgentHandlerFunc(func(ctx context.Context, t *executor.Turn) error {
			if t.Start.Model == nil {
				return echo(ctx, t, *delay)
			}
			if !sleep(ctx, *delay) {
				return ctx.Err()
			}
			return loop(ctx, t)
		}),
		Logger: log,
	})
	if err := c.Run(ctx); err != nil && !errors.Is(err, executor.ErrClientStopped) {
		log.Error("agent end stopped", "err", err)
		os.Exit(1)
	}
}

// loop runs one turn: the model (through the gateway) answers the
// conversation, its tool calls run through the tools endpoint, until it
// answers without one.
func loop(ctx context.Context, t *executor.Turn) error {
	g := t.Start.Model
	var agent struct {
		System string `json:"system"`
	}
	_ = json.Unmarshal(t.Start.Agent, &agent)
	params := anthropic.MessageNewParams{Model: anthropic.Model(g.Model), MaxTokens: 4096, Messages: conversation(t.Start),
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"command": map[string]string{"type": "string"}}, Required: []string{"command"}}, "bash")}}
	if agent.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: agent.System}}
	}
	for {
		msg, err := callModel(ctx, t, params)
		if err != nil {
			return err
		}
		var results []anthropic.ContentBlockParamUnion
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				if err := t.Send(ctx, ma.Event{Type: ma.EventAgentMessage, Content: []ma.ContentBlock{{Type: "text", Text: b.Text}}}); err != nil {
					return err
				}
			case "tool_use":
				out, isErr, err := callTool(ctx, t, b.ID, b.Name, b.Input)
				if err != nil {
					return err
				}
				results = append(results, anthropic.NewToolResultBlock(b.ID, out, isErr))
			}
		}
		if len(results) == 0 {
			return t.EndTurn(ctx)
		}
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
	}
}

// callModel calls the model through the gateway, with a fresh model token
// when the one it has expired (401).
func callModel(ctx context.Context, t *executor.Turn, params anthropic.MessageNewParams) (*anthropic.Message, error) {
	for refreshed := false; ; refreshed = true {
		g := t.Start.Model
		client := anthropic.NewClient(option.WithBaseURL(g.BaseURL), option.WithAPIKey(g.Token), option.WithMaxRetries(0))
		msg, err := client.Messages.New(ctx, params)
		var apiErr *anthropic.Error
		if refreshed || !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
			return msg, err
		}
		fresh, err := t.RefreshModelToken(ctx)
		if err != nil {
			return nil, err
		}
		t.Start.Model = &fresh
	}
}

// callTool runs a tool call through the platform tools endpoint, on the
// session's hands; the tool use's id is the idempotency key, so a retried
// call never runs twice.
func callTool(ctx context.Context, t *executor.Turn, id, name string, input json.RawMessage) (string, bool, error) {
	res, err := t.CallTool(ctx, executor.PlatformToolCall{Name: name, Input: input, IdempotencyKey: id})
	if err != nil {
		return "", false, err
	}
	var text strings.Builder
	for _, b := range res.Content {
		text.WriteString(b.Text)
	}
	if text.Len() == 0 {
		text.WriteString(res.ErrorCode)
	}
	return text.String(), res.IsError, nil
}

// conversation turns the session's log and the turn's inputs into
// messages: the user's and the agent's texts.
func conversation(st executor.TurnStart) []anthropic.MessageParam {
	type turn struct {
		user   bool
		blocks []anthropic.ContentBlockParamUnion
	}
	var turns []turn
	for _, raw := range append(st.Transcript, st.Inputs...) {
		var ev ma.Event
		if json.Unmarshal(raw, &ev) != nil || (ev.Type != ma.EventUserMessage && ev.Type != ma.EventAgentMessage) {
			continue
		}
		user := ev.Type == ma.EventUserMessage
		if n := len(turns); n == 0 || turns[n-1].user != user {
			turns = append(turns, turn{user: user})
		}
		for _, b := range ev.Content {
			if b.Type == "text" {
				turns[len(turns)-1].blocks = append(turns[len(turns)-1].blocks, anthropic.NewTextBlock(b.Text))
			}
		}
	}
	msgs := make([]anthropic.MessageParam, len(turns))
	for i, t := range turns {
		msgs[i] = anthropic.NewAssistantMessage(t.blocks...)
		if t.user {
			msgs[i] = anthropic.NewUserMessage(t.blocks...)
		}
	}
	return msgs
}

// echo answers a turn without a model: it thinks, waits, and says the
// user's words back.
func echo(ctx context.Context, t *executor.Turn, delay time.Duration) error {
	var said []string
	for _, raw := range t.Start.Inputs {
		var ev ma.Event
		if json.Unmarshal(raw, &ev) != nil || ev.Type != ma.EventUserMessage {
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
	if !sleep(ctx, delay) {
		return ctx.Err()
	}
	answer := ma.Event{Type: ma.EventAgentMessage, Content: []ma.ContentBlock{{Type: "text", Text: "You said: " + strings.Join(said, " ")}}}
	if err := t.Send(ctx, answer); err != nil {
		return err
	}
	return t.EndTurn(ctx)
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
