package cli

import (
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
	f := &follower{c: c, sessionID: sessionID, r: newRenderer(useColor(out), false), untilIdle: true, reconnect: true,
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
		f.answers.ask = &asker{in: newLineReader(cmd.InOrStdin()), out: f.con}
	}

	// The stream first, then the message: nothing of the turn is missed.
	stream, closeStream, err := openStream(ctx, c, sessionID, true)
	if err != nil {
		return err
	}
	defer closeStream()
	defer f.close()
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

// history shows the session's events so far. done reports that they end
// the follow: the session is over, or it is idle and the follow ends with
// the turn (--until-idle), which then ended before tail started.
func (f *follower) history(ctx context.Context) (done bool, err error) {
	pager := f.c.Beta.Sessions.Events.ListAutoPaging(ctx, f.sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	var last *streamItem
	for pager.Next() {
		raw := pager.Current().RawJSON()
		var it streamItem
		if err := json.Unmarshal([]byte(raw), &it); err != nil {
			return true, fmt.Errorf("decode event: %w", err)
		}
		if err := f.show(raw, it); err != nil {
			return true, err
		}
		switch it.Type {
		case ma.EventStatusRunning, ma.EventStatusIdle, ma.EventStatusRescheduled, ma.EventStatusTerminated, ma.EventSessionDeleted:
			last = &it
		}
	}
	if err := pager.Err(); err != nil {
		return true, f.c.explain(err)
	}
	if last == nil || last.Type == ma.EventStatusRunning || last.Type == ma.EventStatusRescheduled {
		return false, nil
	}
	if last.StopReason != nil && last.StopReason.Type == ma.StopRequiresAction {
		// The turn is paused, not over: whoever answers (perhaps a moment
		// ago, before the session said it runs again) resumes it, and the
		// follow goes on with it.
		return false, nil
	}
	return f.react(ctx, *last)
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
session waits for, and follows a turn paused for input until someone answers.`,
		Args: cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			f := &follower{c: c, sessionID: args[0], r: newRenderer(useColor(out), true), untilIdle: untilIdle, reconnect: true}
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
			defer f.close()
			if history {
				done, err := f.history(ctx)
				if done || err != nil {
					return err
				}
			}
			err = f.follow(ctx, stream)
			if ctx.Err() != nil {
				return &exitError{code: exitInterrupted, err: errors.New("stopped following")}
			}
			return err
		}),
	}
	cmd.Flags().BoolVar(&history, "history", false, "show the session's earlier events first")
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "stop when the next turn ends")
	return cmd
}
