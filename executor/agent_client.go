package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// AgentHandler runs the turns given to an agent end (an executor that
// declares [CapabilityAgent] and sets [Options.Agent]).
type AgentHandler interface {
	// RunTurn runs one turn: it reads t.Start, calls models through the
	// gateway (t.Start.Model) and tools through the platform tools
	// endpoint ([Turn.CallTool], with t.Start.Tools), and appends what happens with t.Send,
	// ending with [Turn.EndTurn]. ctx ends on turn.cancel (an interrupt)
	// and when the connection is lost; the harness then ends or restarts
	// the turn itself. An error is logged.
	RunTurn(ctx context.Context, t *Turn) error
}

// AgentHandlerFunc adapts a function to [AgentHandler].
type AgentHandlerFunc func(ctx context.Context, t *Turn) error

// RunTurn implements AgentHandler.
func (f AgentHandlerFunc) RunTurn(ctx context.Context, t *Turn) error { return f(ctx, t) }

// EventTurnEnd is the event an agent end appends last in a turn: the
// harness ends the turn (the session goes idle, end_turn; or
// requires_action when custom tool uses wait for the client).
const EventTurnEnd = "turn.end"

// Turn is one turn on the agent end.
type Turn struct {
	Start TurnStart

	conn *Conn
	http *http.Client // for the platform tools endpoint and the gateway
	mu   sync.Mutex   // guards next and Start's grants
	next int64
}

// Send appends events (each marshalled to JSON: agent.message,
// agent.thinking, agent.tool_use, agent.custom_tool_use, span.* events,
// and last [EventTurnEnd]) with the next sequence. A -32013 conflict
// (a sequence the harness did not expect) is returned as a *RPCError
// with [RPCError.ExpectedSequence]; Send then continues from that
// sequence, so a Send that timed out may be retried safely: what the
// harness already has is refused, never appended twice.
func (t *Turn) Send(ctx context.Context, events ...any) error {
	raw := make([]json.RawMessage, len(events))
	for i, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("executor: encode event %d: %w", i, err)
		}
		raw[i] = b
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var res SessionEventResult
	err := t.conn.Call(ctx, MethodSessionEvent, SessionEventParams{SessionID: t.Start.SessionID, TurnID: t.Start.TurnID, Sequence: t.next, Events: raw}, &res)
	var re *RPCError
	if errors.As(err, &re) {
		if n, ok := re.ExpectedSequence(); ok {
			t.next = n
		}
	}
	if err != nil {
		return err
	}
	t.next = res.NextSequence
	return nil
}

// EndTurn appends the end of the turn.
func (t *Turn) EndTurn(ctx context.Context) error {
	return t.Send(ctx, map[string]string{"type": EventTurnEnd})
}

// RefreshModelToken asks for a fresh model token (model_token.refresh).
// Refusals are *RPCError with reason [ReasonTurnInactive],
// [ReasonForbidden] or [ReasonModelTokenUnavailable].
func (t *Turn) RefreshModelToken(ctx context.Context) (TokenGrant, error) {
	var g TokenGrant
	err := t.conn.Call(ctx, MethodModelTokenRefresh, TokenRefreshParams{SessionID: t.Start.SessionID, TurnID: t.Start.TurnID}, &g)
	return g, err
}

// RefreshToolsToken asks for a fresh tools token (tools_token.refresh).
// Refusals are *RPCError with reason [ReasonTurnInactive],
// [ReasonForbidden] or [ReasonToolsTokenUnavailable].
func (t *Turn) RefreshToolsToken(ctx context.Context) (TokenGrant, error) {
	var g TokenGrant
	err := t.conn.Call(ctx, MethodToolsTokenRefresh, TokenRefreshParams{SessionID: t.Start.SessionID, TurnID: t.Start.TurnID}, &g)
	return g, err
}

// ExpectedSequence returns data.expected_sequence of a -32013 conflict.
func (e *RPCError) ExpectedSequence() (int64, bool) {
	if e.Data == nil || e.Data.ExpectedSequence == nil {
		return 0, false
	}
	return *e.Data.ExpectedSequence, true
}

// agentTurns are the turns running on a client, by turn id.
type agentTurns struct {
	mu      sync.Mutex // guards cancels
	cancels map[string]context.CancelFunc
}

// turnStart accepts a turn and runs it in a goroutine of the client.
func (c *Client) turnStart(ctx context.Context, conn *Conn, params json.RawMessage) (any, error) {
	if c.opts.Agent == nil {
		e := NewRPCError(CodeCapabilityUnavailable, "").WithDetail("this executor runs no agent loop")
		e.Data.Capability = CapabilityAgent
		return nil, e
	}
	var p TurnStart
	if err := DecodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.SessionID == "" || p.TurnID == "" {
		return nil, NewRPCError(CodeInvalidParams, "").WithDetail("session_id and turn_id are required")
	}
	delta := p.TranscriptSince != ""
	switch ok, err := c.held.rebuild(&p); {
	case err != nil:
		return nil, NewRPCError(CodeInvalidParams, "").WithDetail(err.Error())
	case !ok:
		c.emit(Event{Type: EventTranscriptUnavailable, SessionID: p.SessionID})
		return TurnStartResult{Reason: ReasonTranscriptUnavailable}, nil
	}
	if c.opts.AcceptTurn != nil {
		if err := c.opts.AcceptTurn(ctx, &p); err != nil {
			c.logger.Info("turn refused", "session", p.SessionID, "turn", p.TurnID, "err", err)
			return nil, err
		}
	}
	c.emit(Event{Type: EventTurnStarted, SessionID: p.SessionID, Delta: delta})
	tctx, cancel := context.WithCancel(ctx)
	c.turns.mu.Lock()
	if c.turns.cancels == nil {
		c.turns.cancels = make(map[string]context.CancelFunc)
	}
	c.turns.cancels[p.TurnID] = cancel
	c.turns.mu.Unlock()
	t := &Turn{Start: p, conn: conn, http: c.opts.HTTPClient}
	c.wg.Go(func() {
		defer func() {
			c.turns.mu.Lock()
			delete(c.turns.cancels, p.TurnID)
			c.turns.mu.Unlock()
			cancel()
		}()
		if err := c.opts.Agent.RunTurn(tctx, t); err != nil && tctx.Err() == nil {
			c.logger.Warn("agent turn failed", "session", p.SessionID, "turn", p.TurnID, "err", err)
		}
	})
	return TurnStartResult{Accepted: true}, nil
}

// turnCancel cancels a running turn's context.
func (c *Client) turnCancel(params json.RawMessage) (any, error) {
	var p TurnCancelParams
	if err := DecodeParams(params, &p); err != nil {
		return nil, err
	}
	c.turns.mu.Lock()
	cancel := c.turns.cancels[p.TurnID]
	c.turns.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil, nil
}
