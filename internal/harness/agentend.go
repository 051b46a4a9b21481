package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// AgentEndMetadataKey is the session metadata key that hands a session's
// turns to an external agent end: "true" opts in.
const AgentEndMetadataKey = "reins.agent_end"

// ServedByAgentEnd reports whether the session's turns run on an agent end.
func ServedByAgentEnd(sess *ma.Session) bool {
	return sess.Metadata[AgentEndMetadataKey] == "true"
}

// AgentEnds starts turns on external agent ends.
type AgentEnds interface {
	// StartTurn sends turn.start to an agent end that may run the
	// session's turn; what it appends must be handed to sink. A non-nil
	// Wait means no agent end is connected: the session waits on it. An
	// error wrapping store.ErrFenced means the session moved to another
	// replica (one its agent ends are connected to): the runner leaves.
	// An agent end that refuses the turn is a *TurnRefusedError.
	StartTurn(ctx context.Context, sess *ma.Session, start TurnStart, sink TurnSink) (AgentTurn, *tool.Wait, error)
}

// TurnRefusedError is an agent end's refusal of a turn.start. The session
// records a session.error of Type (unknown_error when the agent end named
// no type reins knows) and, while Retryable, starts the turn again with
// the retry policy, as for a failed model call; then the turn ends with
// retries_exhausted.
type TurnRefusedError struct {
	Type      string
	Message   string
	Retryable bool
	// MCPServer names the MCP server of an MCP type.
	MCPServer string
}

func (e *TurnRefusedError) Error() string { return "the agent end refused the turn: " + e.Message }

// sessionErrorTypes are the session.error types a refusal may name.
var sessionErrorTypes = []string{ma.ErrorUnknown, ma.ErrorModelOverloaded, ma.ErrorModelRateLimited, ma.ErrorModelRequestFailed,
	ma.ErrorMCPConnectionFailed, ma.ErrorMCPAuthenticationFailed, ma.ErrorBilling, ma.ErrorCredentialHostUnreachable}

// failure is the refusal as the session error policy sees it.
func (e *TurnRefusedError) failure() failure {
	f := failure{errType: e.Type, message: e.Error(), retryable: e.Retryable}
	if !slices.Contains(sessionErrorTypes, f.errType) {
		f.errType = ma.ErrorUnknown
	}
	if f.errType == ma.ErrorMCPConnectionFailed || f.errType == ma.ErrorMCPAuthenticationFailed {
		f.mcpServer = e.MCPServer
	}
	return f
}

// TurnStart is what an agent end is told at the start of a turn: the
// events that start it, the log before them and the agent, as the API
// shows them.
type TurnStart struct {
	// TurnID names the turn; the tokens of the turn carry it, and
	// [Harness.AgentTurn] finds it while it runs.
	TurnID     string
	Inputs     []json.RawMessage
	Transcript []json.RawMessage
	Agent      json.RawMessage
	// Delta, if set, is Transcript as a delta over what an agent end
	// holds: AgentEnds sends it instead of Transcript when the turn goes
	// to that agent end.
	Delta *TranscriptDelta

	transcriptIDs []string // the ids of Transcript's events
}

// TranscriptDelta is a transcript as the events after Since of the copy
// an agent end (Holder, see [AgentTurn]) keeps of turn Base's transcript
// and inputs.
type TranscriptDelta struct {
	Holder, Base, Since string
	Events              []json.RawMessage
}

// TurnSink takes an agent end's batches of events to the runner of the
// turn. Append returns once the batch is appended, or refused:
// ErrTurnInactive, or an *InvalidEventsError (nothing appended).
type TurnSink interface {
	Append(ctx context.Context, events []json.RawMessage) error
}

// AgentTurn is a turn running on an agent end.
type AgentTurn interface {
	Done() <-chan struct{}
	Err() error
	End()
	Cancel(ctx context.Context, reason string)
	// TranscriptHolder names the agent end's connection when it keeps
	// the transcript and inputs it was sent (for a later
	// [TurnStart.Delta]), else "".
	TranscriptHolder() string
}

// EventTurnEnd is the last event an agent end appends in a turn.
const EventTurnEnd = "turn.end"

// ErrTurnInactive refuses events for a turn that is over.
var ErrTurnInactive = errors.New("the turn is not running")

// InvalidEventsError refuses a batch with an event an agent end may not
// append.
type InvalidEventsError struct{ Detail string }

func (e *InvalidEventsError) Error() string { return e.Detail }

// agentEventTypes are the events an agent end may append.
var agentEventTypes = []string{ma.EventAgentMessage, ma.EventAgentThinking, ma.EventAgentCustomToolUse,
	ma.EventSpanModelRequestStart, ma.EventSpanModelRequestEnd, EventTurnEnd}

// agentBatch is one session.event on its way to the runner, which appends
// it through its own write path and answers on reply.
type agentBatch struct {
	events []json.RawMessage
	reply  chan error
}

// turnSink hands an agent end's batches to the runner that runs the turn.
type turnSink struct {
	batches chan agentBatch
	gone    chan struct{} // closed when the runner stops reading
}

// Append implements TurnSink.
func (s *turnSink) Append(ctx context.Context, events []json.RawMessage) error {
	b := agentBatch{events: events, reply: make(chan error, 1)}
	err, sent := askRunner(ctx, s.batches, b, b.reply, s.gone)
	if sent != nil {
		return sent
	}
	return err
}

// askRunner hands q to the runner of a turn on ch and waits for its
// answer on reply. The error is ErrTurnInactive when the runner stopped
// reading (gone is closed) before it took q, or ctx's.
func askRunner[Q, A any](ctx context.Context, ch chan<- Q, q Q, reply <-chan A, gone <-chan struct{}) (A, error) {
	var zero A
	select {
	case ch <- q:
	case <-gone:
		return zero, ErrTurnInactive
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case a := <-reply:
		return a, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// turnStart is what the agent end is told: the inputs since the session
// last went idle, the log before them, and the agent. live holds the live
// events.
func turnStart(sess *ma.Session, live []logEntry) (TurnStart, error) {
	cut := 0
	for i, ev := range live {
		if ev.Type == ma.EventStatusIdle {
			cut = i + 1
		}
	}
	st := TurnStart{Inputs: []json.RawMessage{}}
	for i, ev := range live {
		b := ev.Raw
		switch {
		case i < cut:
			st.Transcript = append(st.Transcript, b)
			st.transcriptIDs = append(st.transcriptIDs, ev.ID)
		case ev.Type == ma.EventUserMessage || ev.Type == ma.EventUserCustomToolResult || ev.Type == ma.EventUserToolConfirmation:
			st.Inputs = append(st.Inputs, b)
		default:
			st.Transcript = append(st.Transcript, b) // what this turn already did
			st.transcriptIDs = append(st.transcriptIDs, ev.ID)
		}
	}
	agent, err := json.Marshal(sess.Agent)
	st.Agent = agent
	return st, err
}

// agentTurn runs one turn on an agent end. A turn.start the agent end
// refuses is retried with the retry policy (retrying session.errors of
// the type it named), then the turn ends with retries_exhausted.
func (r *runner) agentTurn(ctx context.Context, gen uint64, sess *ma.Session) error {
	for attempt := 1; ; attempt++ {
		err := r.agentTurnOnce(ctx, gen, sess)
		var refused *TurnRefusedError
		if !errors.As(err, &refused) {
			return err
		}
		r.h.log.Info("agent end refused the turn", "session", sess.ID, "attempt", attempt, "type", refused.Type, "err", refused.Message)
		if retry, err := r.failAttempt(ctx, gen, refused.failure(), attempt, ""); !retry {
			return err
		}
	}
}

// agentTurnOnce starts the turn on an agent end and appends what the
// agent end sends (through update, the runner's one write path) until the
// end of the turn, an interrupt, or the loss of the agent end. A refusal
// is returned as a *TurnRefusedError.
func (r *runner) agentTurnOnce(ctx context.Context, gen uint64, sess *ma.Session) error {
	tctx, done := r.turnContext(ctx, gen)
	defer done()
	start, err := turnStart(sess, r.log.liveEntries())
	if err != nil {
		return err
	}
	sink := &turnSink{batches: make(chan agentBatch), gone: make(chan struct{})}
	defer close(sink.gone)
	start.TurnID = ids.New("turn_")
	active, forget := r.h.addTurn(sess.ID, start.TurnID, sess.Agent.Model.ID)
	defer forget()
	start.Delta = r.sent.delta(&start)
	r.sent = nil // until an agent end accepts the turn
	turn, wait, err := r.h.cfg.AgentEnds.StartTurn(tctx, sess, start, sink)
	if err == nil && wait == nil {
		r.sent = newSentTranscript(turn.TranscriptHolder(), &start)
	}
	switch {
	case wait != nil:
		return r.reschedule(ctx, gen, wait)
	case tctx.Err() != nil:
		return ctx.Err() // an interrupt: the next step reads it
	case errors.Is(err, store.ErrFenced):
		return err // the session moved to another replica
	case errors.As(err, new(*TurnRefusedError)):
		return err
	case err != nil:
		return r.agentEndFailed(ctx, fmt.Sprintf("the agent end refused the turn: %v", err))
	}
	defer turn.End()
	defer func() {
		if err := r.closeSpans(context.WithoutCancel(ctx), active); err != nil {
			r.h.log.Warn("closing the model gateway's spans", "session", sess.ID, "err", err)
		}
	}()
	awaits := false // tool uses of the turn wait for the client
	for {
		select {
		case c := <-active.calls:
			res, err := r.platformToolCall(ctx, tctx, sess, c.call, &awaits)
			c.reply <- toolCallReply{res, err}
			if err != nil && !errors.Is(err, ErrTurnInactive) {
				return err
			}
		case b := <-sink.batches:
			ended, err := r.appendAgentEvents(ctx, active, b.events, &awaits)
			var ie *InvalidEventsError
			if err != nil && !errors.As(err, &ie) && !errors.Is(err, ErrTurnInactive) {
				b.reply <- errors.New("the event could not be appended")
				return err
			}
			b.reply <- err
			if ended {
				return nil
			}
		case c := <-active.modelCalls:
			err := c.fn(ctx, r)
			c.reply <- err
			if errors.Is(err, errTurnExhausted) {
				// The turn ended in the log. No turn.cancel: it would race
				// the provider's error on its way to the agent end, which
				// learns the end from it and from turn_inactive.
				return nil
			}
		case <-turn.Done():
			r.sent = nil
			return r.agentEndFailed(ctx, "the agent end running the turn was lost; the turn starts again on the next agent end that connects")
		case <-tctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), turnCancelWait)
			turn.Cancel(cctx, "interrupt")
			cancel()
			return ctx.Err() // nil for an interrupt: the next step reads it
		}
	}
}

// turnCancelWait bounds the turn.cancel notification.
const turnCancelWait = 5 * time.Second

// appendAgentEvents checks and appends one batch; ended reports that the
// batch ended the turn. A refused batch is an *InvalidEventsError (or ErrTurnInactive) and
// nothing of it is appended. awaits says that tool uses of the turn wait
// for the client (custom tool uses, tools to confirm): the end of the
// turn then leaves the next step to go idle with requires_action.
func (r *runner) appendAgentEvents(ctx context.Context, active *ActiveTurn, raw []json.RawMessage, awaits *bool) (ended bool, err error) {
	plan := planTools(&r.sess.Agent)
	evs := make([]*ma.Event, 0, len(raw))
	for i, b := range raw {
		var ev ma.Event
		if err := json.Unmarshal(b, &ev); err != nil {
			return false, invalidEvent(i, err.Error())
		}
		if !slices.Contains(agentEventTypes, ev.Type) {
			return false, invalidEvent(i, fmt.Sprintf("type %q: an agent end appends %v", ev.Type, agentEventTypes))
		}
		if ended {
			return false, invalidEvent(i, "nothing may follow turn.end")
		}
		if ev.Type == EventTurnEnd {
			ended = true
			continue
		}
		if ev.Type == ma.EventAgentCustomToolUse && !plan.custom[ev.Name] {
			return false, invalidEvent(i, fmt.Sprintf("%q is not a custom tool of the agent", ev.Name))
		}
		ev.ID, ev.ProcessedAt = "", nil
		evs = append(evs, &ev)
	}
	hasCustom := *awaits || slices.ContainsFunc(evs, func(ev *ma.Event) bool { return ev.Type == ma.EventAgentCustomToolUse })
	err = r.update(ctx, func(tx store.Tx) error {
		if tx.Session().Status != ma.StatusRunning {
			return ErrTurnInactive
		}
		now := r.h.now()
		for _, ev := range evs {
			ev.ProcessedAt = &now
		}
		if err := tx.Append(evs...); err != nil {
			return err
		}
		if ended {
			// A gateway call still open (its response cut short) ends
			// with the turn, before the turn's last status.
			if err := appendSpanEnds(tx, active, now); err != nil {
				return err
			}
		}
		if ended && !hasCustom {
			return r.idle(tx, ma.StopEndTurn, nil)
		}
		return nil // tool uses wait for the client: the next step goes requires_action
	})
	if err != nil {
		return false, err
	}
	if ended {
		clear(active.openSpans)
	}
	*awaits = hasCustom
	return ended, nil
}

func invalidEvent(i int, detail string) error {
	return &InvalidEventsError{Detail: fmt.Sprintf("events[%d]: %s", i, detail)}
}

// agentEndFailed records a turn that could not go on on its agent end: a
// retrying unknown_error; the next step starts the turn again (and waits
// in rescheduling while no agent end is connected).
func (r *runner) agentEndFailed(ctx context.Context, message string) error {
	return r.update(ctx, func(tx store.Tx) error {
		now := r.h.now()
		return tx.Append(&ma.Event{Type: ma.EventSessionError, ProcessedAt: &now,
			Error: &ma.SessionError{Type: ma.ErrorUnknown, Message: message, RetryStatus: ma.RetryStatus{Type: ma.RetryRetrying}}})
	})
}
