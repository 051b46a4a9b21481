package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/anthropics/anthropic-sdk-go/v2"

	ma "github.com/reinsdev/reins/managedagents"
)

// Exit statuses of `sessions run` and `sessions tail` beyond 0 and 1.
const (
	// exitNeedsInput: the session waits for an answer this run could not
	// give (no terminal, no --auto-approve/--auto-deny/--tool-response).
	exitNeedsInput = 2
	// exitInterrupted: Ctrl-C, as shells report SIGINT.
	exitInterrupted = 130
)

// eventStream is the SDK's session event stream as the follower uses it.
type eventStream interface {
	Next() bool
	Current() anthropic.BetaManagedAgentsStreamSessionEventsUnion
	Err() error
}

// answers decides what to answer when a session requires action.
type answers struct {
	autoApprove bool
	autoDeny    bool
	// toolResponses are canned results of custom tools, by tool name.
	toolResponses map[string]string
	// ask is nil without a terminal.
	ask *asker
}

// follower reads a session's stream, shows it, and reacts to its status.
type follower struct {
	c         *apiClient
	sessionID string
	r         *renderer
	con       *console
	// raw writes frames as JSON lines (--output json) instead of text.
	raw io.Writer
	// answers is nil for a passive follower (tail).
	answers *answers
	// untilIdle ends the follow when a turn ends (run; tail --until-idle).
	untilIdle bool
	// await, when set, is the id of the message sent: idles before it was
	// taken up belong to an earlier turn and do not end the follow.
	await   string
	awaited bool
}

// follow consumes the stream until the turn ends (untilIdle), the session
// is terminated or deleted, the stream ends, or ctx is cancelled.
func (f *follower) follow(ctx context.Context, stream eventStream) error {
	for stream.Next() {
		raw := stream.Current().RawJSON()
		var it streamItem
		if err := json.Unmarshal([]byte(raw), &it); err != nil {
			return fmt.Errorf("decode stream event: %w", err)
		}
		if err := f.show(raw, it); err != nil {
			return err
		}
		if it.ID != "" && it.ID == f.await && (it.ProcessedAt != nil || it.Flushed) {
			f.awaited = true
		}
		done, err := f.react(ctx, it)
		if done || err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := stream.Err(); err != nil {
		return f.c.explain(err)
	}
	return errors.New("the event stream ended before the session went idle; is the server shutting down?")
}

// show writes one frame.
func (f *follower) show(raw string, it streamItem) error {
	if f.raw != nil {
		_, err := fmt.Fprintln(f.raw, raw)
		if it.ID != "" {
			f.r.Render(it) // keep tool uses and turn state for react
		}
		return err
	}
	text := f.r.Render(it)
	return f.con.Write(text, f.r.Working())
}

// react handles the frames that end or pause a turn.
func (f *follower) react(ctx context.Context, it streamItem) (done bool, err error) {
	switch it.Type {
	case ma.EventStatusTerminated:
		return true, &exitError{code: 1, err: errors.New("the session was terminated")}
	case ma.EventSessionDeleted:
		return true, &exitError{code: 1, err: errors.New("the session was deleted")}
	case ma.EventStatusIdle:
		// An idle before the sent message was taken up ends an earlier
		// turn; only its pending actions concern this run.
		before := f.await != "" && !f.awaited
		if it.StopReason == nil {
			return f.untilIdle && !before, nil
		}
		switch it.StopReason.Type {
		case ma.StopRequiresAction:
			if f.answers == nil {
				if f.untilIdle {
					return true, &exitError{code: exitNeedsInput, err: fmt.Errorf("the session waits for input: answer with `reins sessions send %s --approve|--deny|--tool-result EVENT_ID`", f.sessionID)}
				}
				return false, nil
			}
			return false, f.resolve(ctx, it.StopReason.EventIDs)
		case ma.StopRetriesExhausted:
			if f.untilIdle && !before {
				return true, &exitError{code: 1, err: errors.New("the turn was abandoned")}
			}
		default:
			return f.untilIdle && !before, nil
		}
	}
	return false, nil
}

// resolve answers the pending tool confirmations and custom tool uses.
func (f *follower) resolve(ctx context.Context, ids []string) error {
	var events []anthropic.BetaManagedAgentsEventParamsUnion
	for _, id := range ids {
		ev, ok := f.r.Tool(id)
		if !ok {
			return f.needsInput(id, "an event this run did not see")
		}
		if ev.Type == ma.EventAgentCustomToolUse {
			text, ok := f.answers.toolResponses[ev.Name]
			if !ok {
				if f.answers.ask == nil {
					return f.needsInput(id, "the result of custom tool "+ev.Name)
				}
				var err error
				text, err = f.answers.ask.ask(ctx, fmt.Sprintf("result of custom tool %s %s: ", ev.Name, oneLine(string(ev.Input), 120)))
				if err != nil {
					return err
				}
			}
			events = append(events, anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
				CustomToolUseID: id,
				Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{
					{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}},
				},
			}})
			continue
		}
		allow, denyMessage := false, ""
		switch {
		case f.answers.autoApprove:
			allow = true
		case f.answers.autoDeny:
			denyMessage = "The person running the session denied this tool call (--auto-deny)."
		case f.answers.ask != nil:
			var err error
			allow, err = f.answers.ask.confirm(ctx, fmt.Sprintf("allow %s %s?", ev.Name, oneLine(string(ev.Input), 120)))
			if err != nil {
				return err
			}
			if !allow {
				denyMessage = "The person running the session denied this tool call."
			}
		default:
			return f.needsInput(id, "approval of "+ev.Name)
		}
		conf := &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{ToolUseID: id, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}
		if !allow {
			conf.Result = anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultDeny
			conf.DenyMessage = anthropic.String(denyMessage)
		}
		events = append(events, anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: conf})
	}
	if len(events) == 0 {
		return nil
	}
	_, err := f.c.Beta.Sessions.Events.Send(ctx, f.sessionID, anthropic.BetaSessionEventSendParams{Events: events})
	return f.c.explain(err)
}

func (f *follower) needsInput(id, what string) error {
	return &exitError{code: exitNeedsInput, err: fmt.Errorf(
		"the session waits for %s (event %s) and there is no terminal to ask: answer with `reins sessions send %s --approve|--deny|--tool-result %s`, or run with --auto-approve, --auto-deny or --tool-response NAME=TEXT",
		what, id, f.sessionID, id)}
}

// openStream opens the session's event stream; it returns once the server
// has answered, so events sent afterwards are seen.
func openStream(ctx context.Context, c *apiClient, sessionID string, previews bool) (eventStream, func(), error) {
	var p anthropic.BetaSessionEventStreamParams
	if previews {
		p.EventDeltas = []anthropic.BetaManagedAgentsDeltaType{anthropic.BetaManagedAgentsDeltaTypeAgentMessage}
	}
	s := c.Beta.Sessions.Events.StreamEvents(ctx, sessionID, p)
	if err := s.Err(); err != nil {
		s.Close()
		return nil, nil, c.explain(err)
	}
	return s, func() { s.Close() }, nil
}
