package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

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
	// reconnect opens a new stream when one breaks.
	reconnect bool
	// closers close the streams opened on reconnects.
	closers []func()
	// current is the stream followed last: a new one after a reconnect.
	current eventStream
}

// follow consumes the stream until the turn ends (untilIdle), the session
// is terminated or deleted, or ctx is cancelled. When the stream breaks
// (the server restarted) and reconnect is set, it opens a new one, shows
// what it missed from the session's log and carries on.
func (f *follower) follow(ctx context.Context, stream eventStream) error {
	for {
		f.current = stream
		done, err := f.consume(ctx, stream)
		if done {
			return err
		}
		if !f.reconnect {
			if err != nil {
				return f.c.explain(err)
			}
			return errors.New("the event stream ended before the session went idle; is the server shutting down?")
		}
		var caughtUp bool
		stream, caughtUp, err = f.reattach(ctx, err)
		if caughtUp || err != nil {
			return err
		}
	}
}

// consume reads the stream. done reports that the follow is over (with
// err as its result); otherwise the stream ended, with err its error.
func (f *follower) consume(ctx context.Context, stream eventStream) (done bool, err error) {
	for stream.Next() {
		var it streamItem
		raw := stream.Current().RawJSON()
		if err := json.Unmarshal([]byte(raw), &it); err != nil {
			return true, fmt.Errorf("decode stream event: %w", err)
		}
		if done, err := f.handle(ctx, raw, it); done || err != nil {
			return true, err
		}
	}
	if err := ctx.Err(); err != nil {
		return true, err
	}
	return false, stream.Err()
}

// handle shows one frame and reacts to it. A persisted event seen before
// (history and stream overlap, a queued event's second echo) is reacted
// to once.
func (f *follower) handle(ctx context.Context, raw string, it streamItem) (done bool, err error) {
	dup := it.ID != "" && f.r.seen[it.ID]
	if err := f.show(raw, it); err != nil {
		return true, err
	}
	if it.ID != "" && it.ID == f.await && (it.ProcessedAt != nil || it.Flushed) {
		f.awaited = true
	}
	if dup {
		return false, nil
	}
	return f.react(ctx, it)
}

// reconnectFor is how long a follower tries to reach the server again.
const reconnectFor = 2 * time.Minute

// reattach opens a new stream after the last one broke, then catches up
// on the events of the session's log it missed. caughtUp reports that
// those ended the follow (with err its result).
func (f *follower) reattach(ctx context.Context, cause error) (_ eventStream, caughtUp bool, err error) {
	reason := "the stream ended"
	if cause != nil {
		reason = rootCause(cause).Error()
	}
	f.note(fmt.Sprintf("lost the connection to the server (%s); reconnecting…", reason))
	deadline := time.Now().Add(reconnectFor)
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		select {
		case <-ctx.Done():
			return nil, true, ctx.Err()
		case <-time.After(delay):
		}
		stream, closeStream, err := openStream(ctx, f.c, f.sessionID, true)
		if err == nil {
			f.closers = append(f.closers, closeStream)
			f.note("reconnected")
			done, err := f.catchUp(ctx)
			return stream, done, err
		}
		if ctx.Err() != nil {
			return nil, true, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, true, fmt.Errorf("lost the connection to the server at %s and could not reconnect within %s (%v); re-attach with `reins sessions tail %s --history --until-idle`",
				f.c.url, reconnectFor, rootCause(err), f.sessionID)
		}
	}
}

// catchUp shows and reacts to the events of the session's log not seen
// yet.
func (f *follower) catchUp(ctx context.Context) (done bool, err error) {
	pager := f.c.Beta.Sessions.Events.ListAutoPaging(ctx, f.sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	for pager.Next() {
		raw := pager.Current().RawJSON()
		var it streamItem
		if err := json.Unmarshal([]byte(raw), &it); err != nil {
			return true, fmt.Errorf("decode event: %w", err)
		}
		if done, err := f.handle(ctx, raw, it); done || err != nil {
			return true, err
		}
	}
	if err := pager.Err(); err != nil {
		return true, f.c.explain(err)
	}
	return false, nil
}

// note writes a line about the follower itself (not in JSON output).
func (f *follower) note(text string) {
	if f.raw == nil {
		f.con.Write(f.r.line(styleYellow, text), false)
	}
}

// close closes the streams the follower opened itself.
func (f *follower) close() {
	for _, c := range f.closers {
		c()
	}
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
			ids := f.needsAnswer(it.StopReason.EventIDs)
			if len(ids) == 0 {
				return false, nil // a pull worker answers; the turn goes on
			}
			if f.answers == nil {
				if f.untilIdle {
					return true, &exitError{code: exitNeedsInput, err: fmt.Errorf("the session waits for input: answer with `reins sessions send %s --approve|--deny|--tool-result EVENT_ID`", f.sessionID)}
				}
				return false, nil
			}
			return false, f.resolve(ctx, ids)
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

// needsAnswer leaves out of the ids a session waits on the tool uses a
// pull worker answers.
func (f *follower) needsAnswer(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !f.r.AwaitsWorker(id) {
			out = append(out, id)
		}
	}
	return out
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
				text, err = f.answers.ask.ask(ctx, fmt.Sprintf("result of custom tool %s %s: ", ev.Name, oneLine(unescapeJSON(string(ev.Input)), 120)))
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
			allow, err = f.answers.ask.confirm(ctx, fmt.Sprintf("allow %s %s%s?", ev.Name, oneLine(unescapeJSON(string(ev.Input)), 120), f.r.inThread(ev)))
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
		// Thinking's preview start is what shows it before the answer.
		p.EventDeltas = []anthropic.BetaManagedAgentsDeltaType{anthropic.BetaManagedAgentsDeltaTypeAgentMessage, anthropic.BetaManagedAgentsDeltaTypeAgentThinking}
	}
	s := c.Beta.Sessions.Events.StreamEvents(ctx, sessionID, p)
	if err := s.Err(); err != nil {
		s.Close()
		return nil, nil, c.explain(err)
	}
	return s, func() { s.Close() }, nil
}
