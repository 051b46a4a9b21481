package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

// dreamPoll is how often `dreams watch` reads the dream's status.
const dreamPoll = 500 * time.Millisecond

func dreamsWatch(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "watch DREAM_ID",
		Short: "Follow a dream until it ends, showing its session's work",
		Long: `Follow a dream's status and render its session's events the way ` + "`sessions tail`" + ` does
(from the session's start), until the dream is completed, failed or canceled.
With -o json, each line is a JSON object: the dream when its status changes,
and the session's events as the stream sends them.

Exit status: 0 when the dream completed, 1 when it failed or was canceled, 130
on Ctrl-C (which stops watching only: ` + "`reins dreams cancel`" + ` stops the dream).`,
		Example: `  reins dreams watch drm_01…`,
		Args:    cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := newDreamWatch(c, cmd.OutOrStdout())
			defer w.close()
			err := w.run(ctx, args[0])
			if ctx.Err() != nil {
				return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped watching; the dream goes on (`reins dreams cancel %s` stops it)", args[0])}
			}
			return err
		}),
	}
}

// dreamWatch follows a dream: its status, read every dreamPoll, and its
// session's events, streamed by a passive follower once the session
// exists.
type dreamWatch struct {
	c   *apiClient
	out io.Writer
	// f shows the session's events; its sessionID is set once known.
	f *follower
	// shown is the status shown last.
	shown string
	// tried is set once the session's stream was opened (or failed to).
	tried bool
	// stopFollow stops the follower; done is closed when it has stopped,
	// with ferr its result.
	stopFollow context.CancelFunc
	done       chan struct{}
	ferr       error
}

func newDreamWatch(c *apiClient, out io.Writer) *dreamWatch {
	f := &follower{c: c, r: newRenderer(useColor(out), true), reconnect: true}
	if c.output == outputJSON {
		f.raw = out
		f.con = newConsole(io.Discard, false, false)
	} else {
		f.con = newConsole(out, isTerminal(out), useColor(out))
	}
	return &dreamWatch{c: c, out: out, f: f}
}

// close stops the follower and the console.
func (w *dreamWatch) close() {
	w.stopFollowing()
	w.f.close()
	w.f.con.Close()
}

// run follows the dream until it ends or ctx is done.
func (w *dreamWatch) run(ctx context.Context, id string) error {
	for {
		raw, err := w.c.Beta.Dreams.Get(ctx, id, anthropic.BetaDreamGetParams{})
		if err != nil {
			return err
		}
		d, err := decodeRaw[ma.Dream](raw)
		if err != nil {
			return err
		}
		if d.SessionID != nil && w.f.sessionID == "" {
			w.f.sessionID = *d.SessionID
		}
		if d.Ended() {
			// The session's last events (its final idle) may still be on
			// their way: the log has them all.
			w.stopFollowing()
			if err := w.catchUp(ctx); err != nil {
				return err
			}
			return w.end(raw.RawJSON(), &d)
		}
		if err := w.showStatus(raw.RawJSON(), &d); err != nil {
			return err
		}
		if w.f.sessionID != "" && !w.tried {
			w.startFollowing(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(dreamPoll):
		}
	}
}

// startFollowing streams the session's events from its start (reins
// replays the log from Last-Event-ID 0) in a goroutine.
func (w *dreamWatch) startFollowing(ctx context.Context) {
	w.tried = true
	fctx, cancel := context.WithCancel(ctx)
	p := anthropic.BetaSessionEventStreamParams{EventDeltas: []anthropic.BetaManagedAgentsDeltaType{
		anthropic.BetaManagedAgentsDeltaTypeAgentMessage, anthropic.BetaManagedAgentsDeltaTypeAgentThinking}}
	s := w.c.Beta.Sessions.Events.StreamEvents(fctx, w.f.sessionID, p, option.WithHeader("Last-Event-ID", "0"))
	if err := s.Err(); err != nil {
		s.Close()
		cancel()
		w.f.note(fmt.Sprintf("cannot stream the session's events: %v", w.c.explain(err)))
		return
	}
	w.stopFollow, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		defer s.Close()
		w.ferr = w.f.follow(fctx, s)
	}()
}

// stopFollowing stops the follower and waits for it. A failure of its own
// (not its stop, nor the session's end, which the dream reports) is noted.
func (w *dreamWatch) stopFollowing() {
	if w.stopFollow == nil {
		return
	}
	w.stopFollow()
	<-w.done
	w.stopFollow = nil
	var ee *exitError
	if err := w.ferr; err != nil && !errors.Is(err, context.Canceled) && !errors.As(err, &ee) {
		w.f.note(fmt.Sprintf("stopped streaming the session's events: %v", err))
	}
}

// catchUp shows the session's events not shown yet.
func (w *dreamWatch) catchUp(ctx context.Context) error {
	if w.f.sessionID == "" {
		return nil
	}
	pager := w.c.Beta.Sessions.Events.ListAutoPaging(ctx, w.f.sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	for pager.Next() {
		raw := pager.Current().RawJSON()
		var it streamItem
		if err := json.Unmarshal([]byte(raw), &it); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		if it.ID != "" && w.f.r.seen[it.ID] {
			continue
		}
		if err := w.f.show(raw, it); err != nil {
			return err
		}
	}
	if err := pager.Err(); err != nil {
		// The session may be gone (deleted): the dream says so.
		w.f.note(fmt.Sprintf("cannot list the session's events: %v", w.c.explain(err)))
	}
	return nil
}

// showStatus shows the dream when its status changed.
func (w *dreamWatch) showStatus(raw string, d *ma.Dream) error {
	if d.Status == w.shown {
		return nil
	}
	w.shown = d.Status
	if w.f.raw != nil {
		return w.jsonLine(raw)
	}
	text := fmt.Sprintf("dream %s is %s", d.ID, d.Status)
	if d.Status == ma.DreamRunning {
		text += fmt.Sprintf(" as session %s, writing memory store %s", deref(d.SessionID), dreamOutput(d))
	}
	return w.f.con.Write(w.f.r.line(styleCyan, text), false)
}

// end shows the dream's outcome and returns the command's result.
func (w *dreamWatch) end(raw string, d *ma.Dream) error {
	var s style
	var text string
	var err error
	switch d.Status {
	case ma.DreamCompleted:
		s = styleGreen
		text = fmt.Sprintf("dream %s completed: its result is in memory store %s (%d input tokens, %d output tokens)",
			d.ID, dreamOutput(d), d.Usage.InputTokens, d.Usage.OutputTokens)
	case ma.DreamFailed:
		s = styleRed
		text = fmt.Sprintf("dream %s failed", d.ID)
		if d.Error != nil {
			text += ": " + d.Error.Type + ": " + d.Error.Message
		}
		err = &exitError{code: 1, err: errors.New("the dream failed")}
	default:
		s = styleYellow
		text = fmt.Sprintf("dream %s was %s", d.ID, d.Status)
		err = &exitError{code: 1, err: fmt.Errorf("the dream was %s", d.Status)}
	}
	if w.f.raw != nil {
		if werr := w.jsonLine(raw); werr != nil {
			return werr
		}
		return err
	}
	if werr := w.f.con.Write(w.f.r.line(s, text), false); werr != nil {
		return werr
	}
	return err
}

// jsonLine writes a JSON object on one line.
func (w *dreamWatch) jsonLine(raw string) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(raw)); err != nil {
		buf.Reset()
		buf.WriteString(raw)
	}
	buf.WriteByte('\n')
	_, err := w.out.Write(buf.Bytes())
	return err
}
