package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"

	mcpcobra "github.com/reinsdev/reins/mcp/cobra"
)

// chatFlags are the flags of `reins chat`.
type chatFlags struct {
	session   sessionFields
	sessionID string
}

func newChatCommand() *cobra.Command {
	var cf *clientFlags
	var fl chatFlags
	cmd := &cobra.Command{
		Use:   "chat (--agent AGENT_ID [--environment ENV_ID] | --session SESSION_ID)",
		Short: "Talk with an agent, turn after turn, in one session",
		Long: `Open a session (or continue one with --session, showing what was said so far)
and talk with the agent: each line you type is a message, and the agent's
work is shown as ` + "`sessions run`" + ` shows it. Tool calls that need approval and
custom tools are asked at the terminal.

Ctrl-C during a turn interrupts the turn (the session stops at the next safe
point) and returns to the prompt; a second Ctrl-C before the turn has ended
leaves. Ctrl-C or Ctrl-D at the prompt leaves. The session stays: continue
it later with --session.`,
		Example: `  reins chat --agent agent_01…
  reins chat --session sesn_01…`,
		Args: cobra.NoArgs,
		// A conversation at a terminal is no tool for an agent.
		Annotations: map[string]string{mcpcobra.OmitAnnotation: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fl.sessionID != "" && (fl.session.agent != "" || fl.session.environment != "") {
				return errors.New("--session continues an existing session: drop --agent and --environment")
			}
			return cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
				return runChat(cmd, c, &fl)
			})(cmd, nil)
		},
	}
	cf = addClientFlags(cmd)
	fl.session.register(cmd, false)
	cmd.Flags().StringVar(&fl.sessionID, "session", "", "continue this session instead of creating one")
	return cmd
}

// chat is one `reins chat`: a session, its stream and the person.
type chat struct {
	c       *apiClient
	f       *follower
	in      *lineReader
	sigs    chan os.Signal
	prompt  bool // write a prompt before each line (a terminal)
	errOut  io.Writer
	session string
}

func runChat(cmd *cobra.Command, c *apiClient, fl *chatFlags) error {
	if c.output != outputText {
		return errors.New("chat shows text only; use `reins sessions run -o json` for scripts")
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)

	id := fl.sessionID
	if id == "" {
		sess, err := createSession(ctx, cmd, c, &fl.session)
		if err != nil {
			return err
		}
		id = sess.ID
	}
	out := cmd.OutOrStdout()
	tty := isTerminal(out) && isTerminal(cmd.InOrStdin())
	ch := &chat{c: c, in: newLineReader(cmd.InOrStdin()), sigs: sigs, prompt: tty, errOut: cmd.ErrOrStderr(), session: id}
	ch.f = &follower{c: c, sessionID: id, r: newRenderer(useColor(out), false), untilIdle: true, reconnect: true,
		con: newConsole(out, tty, useColor(out)), answers: &answers{}}
	defer ch.f.con.Close()
	if tty {
		ch.f.answers.ask = &asker{in: ch.in, out: ch.f.con}
	}
	stream, closeStream, err := openStream(ctx, c, id, true)
	if err != nil {
		return err
	}
	defer closeStream()
	defer ch.f.close()
	if fl.sessionID != "" {
		// What was said so far, as tail shows it.
		ch.f.r.showUser = true
		_, err := ch.f.history(ctx)
		ch.f.r.showUser = false
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(ch.errOut, "session %s: type a message; Ctrl-C interrupts a turn, Ctrl-D or Ctrl-C at the prompt leaves\n", id)
	return ch.loop(ctx, stream)
}

// loop reads a message, runs its turn, and again, until the person leaves.
func (ch *chat) loop(ctx context.Context, stream eventStream) error {
	for {
		text, ok := ch.read(ctx)
		if !ok {
			return nil
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		if err := ch.turn(ctx, stream, text); err != nil {
			return err
		}
	}
}

// read prompts and reads a line; ok is false when the person leaves.
func (ch *chat) read(ctx context.Context) (text string, ok bool) {
	if ch.prompt {
		ch.f.con.Write("› ", false)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ch.sigs:
			cancel()
		case <-rctx.Done():
		}
	}()
	s, err := ch.in.read(rctx)
	if err != nil {
		if ch.prompt {
			ch.f.con.Write("\n", false)
		}
		return "", false
	}
	return s, true
}

// turn sends a message and shows the turn until it ends. The first Ctrl-C
// interrupts the turn; a second one before it ended leaves (exit 130).
func (ch *chat) turn(ctx context.Context, stream eventStream, text string) error {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent, err := ch.c.Beta.Sessions.Events.Send(tctx, ch.session, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{
			{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}},
		}},
	}}})
	if err != nil {
		return ch.c.explain(err)
	}
	ch.f.await, ch.f.awaited = "", false
	if len(sent.Data) == 1 && sent.Data[0].ProcessedAt.IsZero() {
		ch.f.await = sent.Data[0].ID
	}
	ch.f.con.Write("", true)
	done := make(chan error, 1)
	if ch.f.current != nil {
		stream = ch.f.current // a newer stream, after a reconnect
	}
	go func() { done <- ch.f.follow(tctx, stream) }()
	interrupted := false
	for {
		select {
		case err := <-done:
			switch {
			case err == nil:
				return nil
			case interrupted && errors.Is(err, context.Canceled):
				// The follow stopped at a question; wait for the end of
				// the interrupted turn.
				tctx, cancel = context.WithCancel(ctx)
				defer cancel()
				ch.f.await = ""
				stream = ch.f.current
				go func() { done <- ch.f.follow(tctx, stream) }()
			case exitCode(err) == 1 || exitCode(err) == exitNeedsInput:
				// The turn ended badly; the chat goes on.
				ch.f.con.Write(ch.f.r.line(styleRed, err.Error()), false)
				if strings.Contains(err.Error(), "terminated") || strings.Contains(err.Error(), "deleted") {
					return err
				}
				return nil
			default:
				return err
			}
		case <-ch.sigs:
			if interrupted {
				return &exitError{code: exitInterrupted, err: errors.New("left the chat during an interrupted turn")}
			}
			interrupted = true
			cancel()
			if err := ch.interrupt(ctx); err != nil {
				return err
			}
		}
	}
}

// interrupt asks the session to stop its turn.
func (ch *chat) interrupt(ctx context.Context) error {
	_, err := ch.c.Beta.Sessions.Events.Send(ctx, ch.session, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{},
	}}})
	if err != nil {
		return fmt.Errorf("could not interrupt the turn: %w", ch.c.explain(err))
	}
	// The follow goroutine owns the renderer: write around it.
	ch.f.con.Write("\n"+styled(ch.f.r.color, styleYellow, "interrupting… (Ctrl-C again leaves)"), true)
	return nil
}
