package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"

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

// runFlags are the flags of `sessions run`.
type runFlags struct {
	session       sessionFields
	sessionID     string
	autoApprove   bool
	autoDeny      bool
	toolResponses []string
}

func sessionsRun(cf *clientFlags) *cobra.Command {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run (--agent AGENT_ID [--environment ENV_ID] | --session SESSION_ID) PROMPT...",
		Short: "Start a session, send a prompt and show the agent's work until it is done",
		Long: `Create a session (or continue one with --session), send the prompt and render the session's events until the
turn ends: streamed text, tool calls and their results, retries and errors.

Tool calls that need approval are asked on a terminal (y/N); without one, use
--auto-approve or --auto-deny. Custom tools are answered from --tool-response
NAME=TEXT, or asked on a terminal.

Exit status: 0 when the turn ends normally, 1 when it ends in an error (the
model's retries ran out, the session was terminated), 2 when the session
waits for input this run cannot give, 130 on Ctrl-C (which interrupts the
session first).`,
		Example: `  reins sessions run --agent agent_01… "Summarise README.md"
  echo "@tool get_weather {\"city\":\"Paris\"}" | reins sessions run --agent agent_01… --tool-response get_weather=sunny`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSession(cmd, cf, &rf, args)
		},
	}
	rf.session.register(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&rf.sessionID, "session", "", "continue this session instead of creating one")
	fl.BoolVar(&rf.autoApprove, "auto-approve", false, "allow every tool call that needs approval")
	fl.BoolVar(&rf.autoDeny, "auto-deny", false, "deny every tool call that needs approval")
	fl.StringArrayVar(&rf.toolResponses, "tool-response", nil, "answer custom tool NAME with TEXT: NAME=TEXT (repeatable)")
	return cmd
}

func runSession(cmd *cobra.Command, cf *clientFlags, rf *runFlags, args []string) error {
	if rf.autoApprove && rf.autoDeny {
		return errors.New("--auto-approve and --auto-deny exclude each other")
	}
	if rf.sessionID != "" && (rf.session.agent != "" || rf.session.environment != "") {
		return errors.New("--session continues an existing session: drop --agent and --environment")
	}
	responses := map[string]string{}
	for _, p := range rf.toolResponses {
		name, text, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return fmt.Errorf("--tool-response: want NAME=TEXT, got %q", p)
		}
		responses[name] = text
	}
	prompt := strings.Join(args, " ")
	stdinTTY := isTerminal(cmd.InOrStdin())
	if prompt == "" && !stdinTTY {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return fmt.Errorf("read prompt from stdin: %w", err)
		}
		prompt = strings.TrimSpace(string(b))
	}
	if prompt == "" {
		return errors.New("give a prompt: reins sessions run --agent ID \"your prompt\"")
	}
	c, err := cf.newClient()
	if err != nil {
		return err
	}
	defer c.close()

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sessionID := rf.sessionID
	if sessionID == "" {
		sess, err := createSession(ctx, cmd, c, &rf.session)
		if ctx.Err() != nil {
			return &exitError{code: exitInterrupted, err: errors.New("interrupted before the session started")}
		}
		if err != nil {
			return err
		}
		sessionID = sess.ID
	}
	out := cmd.OutOrStdout()
	tty := isTerminal(out)
	f := &follower{c: c, sessionID: sessionID, r: newRenderer(useColor(out), false), untilIdle: true,
		answers: &answers{autoApprove: rf.autoApprove, autoDeny: rf.autoDeny, toolResponses: responses}}
	if c.output == outputJSON {
		f.raw = out
		f.con = newConsole(io.Discard, false, false)
	} else {
		f.con = newConsole(out, tty, useColor(out))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "session %s\n", sessionID)
	defer f.con.Close()
	if tty && stdinTTY {
		f.answers.ask = &asker{in: bufio.NewReader(cmd.InOrStdin()), out: f.con}
	}

	// The stream first, then the message: nothing of the turn is missed.
	stream, closeStream, err := openStream(ctx, c, sessionID, true)
	if err != nil {
		return err
	}
	defer closeStream()
	f.con.Write("", true)
	sent, err := c.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{
			{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: prompt}},
		}},
	}}})
	if err == nil {
		if len(sent.Data) == 1 && sent.Data[0].ProcessedAt.IsZero() {
			f.await = sent.Data[0].ID
		}
		err = f.follow(ctx, stream)
	}
	if ctx.Err() != nil {
		stop() // a second Ctrl-C ends the process at once
		f.con.Close()
		return interrupt(context.WithoutCancel(ctx), c, sessionID, f)
	}
	return c.explain(err)
}

// interrupt asks the session to stop its turn and reports exit 130.
func interrupt(ctx context.Context, c *apiClient, sessionID string, f *follower) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{},
	}}})
	if err != nil {
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted, but the interrupt could not be sent: %w", c.explain(err))}
	}
	if f.raw == nil {
		f.con.Write(f.r.line(styleYellow, "interrupted: the session stops its turn at the next safe point"), false)
	}
	return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
}

func sessionsTail(cf *clientFlags) *cobra.Command {
	var history, untilIdle bool
	cmd := &cobra.Command{
		Use:   "tail SESSION_ID",
		Short: "Follow a session's events as they happen",
		Long: `Follow a session's event stream and render it like ` + "`sessions run`" + `, until
Ctrl-C or the session is terminated or deleted. --history shows what happened
before; --until-idle stops at the end of the next turn, with the exit status of
` + "`sessions run`" + `. tail never answers tool confirmations; it shows what the
session waits for.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.newClient()
			if err != nil {
				return err
			}
			defer c.close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			f := &follower{c: c, sessionID: args[0], r: newRenderer(useColor(out), true), untilIdle: untilIdle}
			if c.output == outputJSON {
				f.raw = out
				f.con = newConsole(io.Discard, false, false)
			} else {
				f.con = newConsole(out, isTerminal(out), useColor(out))
			}
			defer f.con.Close()
			stream, closeStream, err := openStream(ctx, c, args[0], true)
			if err != nil {
				return err
			}
			defer closeStream()
			if history {
				pager := c.Beta.Sessions.Events.ListAutoPaging(ctx, args[0], anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
				for pager.Next() {
					raw := pager.Current().RawJSON()
					var it streamItem
					if err := json.Unmarshal([]byte(raw), &it); err != nil {
						return fmt.Errorf("decode event: %w", err)
					}
					if err := f.show(raw, it); err != nil {
						return err
					}
				}
				if err := pager.Err(); err != nil {
					return c.explain(err)
				}
			}
			err = f.follow(ctx, stream)
			if ctx.Err() != nil {
				return &exitError{code: exitInterrupted, err: errors.New("stopped following")}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&history, "history", false, "show the session's earlier events first")
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "stop when the next turn ends")
	return cmd
}
