package executorhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/reinsdev/reins/executor"
)

// TurnSink receives what an agent end sends for one turn. Append must
// append the events through the harness's write path, all or none, and
// return a *RPCError for a refusal the agent end should read (for example
// -32602 for an event it may not append); it is never called twice for the
// same sequence. The refreshes return a fresh grant or a *RPCError whose
// reason is model_token_unavailable / tools_token_unavailable.
type TurnSink interface {
	Append(ctx context.Context, events []json.RawMessage) error
	RefreshModelToken(ctx context.Context) (executor.TokenGrant, error)
	RefreshToolsToken(ctx context.Context) (executor.TokenGrant, error)
}

// AgentTurnRequest asks the hub to start a turn on an agent end.
type AgentTurnRequest struct {
	// EnvironmentID and MachineIDs say which agent ends may run the turn:
	// those of the environment and those of the machines.
	EnvironmentID string
	MachineIDs    []string
	Start         executor.TurnStart
	Sink          TurnSink
	// Delta, if set, is Start's transcript as a delta over what the agent
	// end Delta.ExecutorID holds: it is sent instead of the whole
	// transcript when the turn goes to that very connection.
	Delta *TranscriptDelta
}

// TranscriptDelta is a turn's transcript as the events after Since of the
// copy held by an agent end: the transcript and inputs of turn Base's
// turn.start, on the connection ExecutorID (see [AgentTurn.TranscriptHolder]).
type TranscriptDelta struct {
	ExecutorID, Base, Since string
	Events                  []json.RawMessage
}

// ErrNoAgentEnd is returned by [Hub.StartTurn] when no agent end of the
// session's scopes is connected; wait on [Hub.Changed] (or
// [Hub.ChangedMachine]) and try again.
var ErrNoAgentEnd = errors.New("executor: no agent end available for the session")

// ErrAgentEndLost is the Err of an [AgentTurn] whose agent end's
// connection ended (or was replaced) before the turn did.
var ErrAgentEndLost = errors.New("executor: the agent end was lost before the turn ended")

// AgentTurn is a turn running on an agent end.
type AgentTurn struct {
	SessionID, TurnID string
	// ExecutorID is the agent end that runs it.
	ExecutorID string

	h      *Hub
	conn   *hubConn
	sink   TurnSink
	holder string // conn's id when it keeps transcripts

	seqMu sync.Mutex // held across an append, so one sequence appends once
	next  int64

	once sync.Once
	done chan struct{}
	err  error
}

// TranscriptHolder returns the id of the connection that runs the turn
// when it keeps the transcript it was sent ([FeatureTranscriptDeltas]),
// for a later [AgentTurnRequest.Delta]; "" when it does not.
func (t *AgentTurn) TranscriptHolder() string { return t.holder }

// Done is closed when the turn ended: [AgentTurn.End], [AgentTurn.Cancel]
// or the loss of its agent end (Err is then [ErrAgentEndLost]).
func (t *AgentTurn) Done() <-chan struct{} { return t.done }

// Err says why the turn ended, after Done.
func (t *AgentTurn) Err() error {
	<-t.done
	return t.err
}

// NextSequence is the sequence the harness expects next.
func (t *AgentTurn) NextSequence() int64 {
	t.seqMu.Lock()
	defer t.seqMu.Unlock()
	return t.next
}

func (t *AgentTurn) finish(err error) {
	t.once.Do(func() {
		t.err = err
		close(t.done)
	})
}

func (t *AgentTurn) active() bool {
	select {
	case <-t.done:
		return false
	default:
		return true
	}
}

// End ends the turn on the harness's side (it ended in the log): later
// session.events and refreshes for it are refused with turn_inactive.
func (t *AgentTurn) End() {
	t.h.forgetTurn(t)
	t.finish(nil)
}

// Cancel ends the turn and tells the agent end (turn.cancel) with reason,
// for example "interrupt".
func (t *AgentTurn) Cancel(ctx context.Context, reason string) {
	t.End()
	if err := t.conn.rpc.Notify(ctx, executor.MethodTurnCancel, executor.TurnCancelParams{SessionID: t.SessionID, TurnID: t.TurnID, Reason: reason}); err != nil {
		t.h.logger.Debug("turn.cancel", "session", t.SessionID, "err", err)
	}
}

// StartTurn sends turn.start to the least busy agent end that may run the
// session's turn and returns the running turn. An agent end that refuses
// answers a *RPCError whose reason is the session.error type to record.
func (h *Hub) StartTurn(ctx context.Context, req AgentTurnRequest) (*AgentTurn, error) {
	if req.Start.TurnID == "" {
		req.Start.TurnID = newID("turn_")
	}
	h.mu.Lock()
	c := h.pickAgentLocked(req)
	if c == nil {
		h.mu.Unlock()
		return nil, ErrNoAgentEnd
	}
	t := &AgentTurn{SessionID: req.Start.SessionID, TurnID: req.Start.TurnID, ExecutorID: c.id, h: h, conn: c, sink: req.Sink, done: make(chan struct{})}
	deltas := slices.Contains(c.features, executor.FeatureTranscriptDeltas)
	if deltas {
		t.holder = c.id
	}
	if c.turns == nil {
		c.turns = make(map[string]*AgentTurn)
	}
	c.turns[t.TurnID] = t
	h.mu.Unlock()
	req.Start.Model, req.Start.Tools = c.resolve(req.Start.Model), c.resolve(req.Start.Tools)
	req.Start.TranscriptSince, req.Start.TranscriptBase = "", ""
	start := req.Start
	delta := deltas && req.Delta != nil && req.Delta.ExecutorID == c.id
	if delta {
		start.Transcript, start.TranscriptSince, start.TranscriptBase = req.Delta.Events, req.Delta.Since, req.Delta.Base
	}
	var res executor.TurnStartResult
	err := c.rpc.Call(ctx, executor.MethodTurnStart, start, &res)
	if err == nil && delta && !res.Accepted && res.Reason == executor.ReasonTranscriptUnavailable {
		// The agent end no longer holds what the delta continues: the
		// same turn.start again, whole.
		res = executor.TurnStartResult{}
		err = c.rpc.Call(ctx, executor.MethodTurnStart, req.Start, &res)
	}
	if err != nil {
		t.End()
		return nil, err
	}
	if !res.Accepted {
		t.End()
		return nil, executor.WithReason(executor.CodeResourceUnavailable, res.Reason, "").WithDetail("the agent end refused the turn")
	}
	return t, nil
}

// pickAgentLocked chooses a registered agent end for req: the one running
// the fewest turns.
func (h *Hub) pickAgentLocked(req AgentTurnRequest) *hubConn {
	scopes := []string{principal{EnvironmentID: req.EnvironmentID}.scope()}
	for _, m := range req.MachineIDs {
		scopes = append(scopes, principal{MachineID: m}.scope())
	}
	var best *hubConn
	for _, s := range scopes {
		for c := range h.byScope[s] {
			if c.has(executor.CapabilityAgent) && (best == nil || len(c.turns) < len(best.turns)) {
				best = c
			}
		}
	}
	return best
}

func (h *Hub) forgetTurn(t *AgentTurn) {
	h.mu.Lock()
	if t.conn.turns[t.TurnID] == t {
		delete(t.conn.turns, t.TurnID)
	}
	h.mu.Unlock()
}

// loseTurnsLocked ends the turns of a connection that is going away.
func (c *hubConn) loseTurnsLocked() {
	for id, t := range c.turns {
		delete(c.turns, id)
		t.finish(ErrAgentEndLost)
	}
}

// turn finds a turn of this connection for a request about it: an unknown
// or ended turn is turn_inactive (-32007), another connection's is
// forbidden (-32001).
func (c *hubConn) turn(sessionID, turnID string) (*AgentTurn, error) {
	c.h.mu.Lock()
	t := c.turns[turnID]
	var other bool
	if t == nil {
		for oc := range c.h.conns {
			if oc != c && oc.turns[turnID] != nil {
				other = true
				break
			}
		}
	}
	c.h.mu.Unlock()
	switch {
	case other:
		return nil, executor.WithReason(executor.CodeForbidden, executor.ReasonForbidden, "").WithDetail(fmt.Sprintf("turn %s runs on another agent end", turnID))
	case t == nil || t.SessionID != sessionID || !t.active():
		return nil, executor.WithReason(executor.CodeSessionNotActive, executor.ReasonTurnInactive, "").WithDetail(fmt.Sprintf("turn %s of session %s is not running", turnID, sessionID))
	}
	return t, nil
}

// sessionEvent appends an agent end's events when their sequence is the
// one expected: a gap or a replay is -32013 with data.expected_sequence,
// and nothing is appended.
func (c *hubConn) sessionEvent(ctx context.Context, params json.RawMessage) (any, error) {
	var p executor.SessionEventParams
	if err := executor.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	if len(p.Events) == 0 {
		return nil, executor.NewRPCError(executor.CodeInvalidParams, "").WithDetail("events: at least one event")
	}
	t, err := c.turn(p.SessionID, p.TurnID)
	if err != nil {
		return nil, err
	}
	t.seqMu.Lock()
	defer t.seqMu.Unlock()
	if p.Sequence != t.next {
		e := executor.NewRPCError(executor.CodeConflict, "").WithDetail(fmt.Sprintf("sequence %d: expected %d", p.Sequence, t.next))
		next := t.next
		e.Data.ExpectedSequence = &next
		return nil, e
	}
	if !t.active() {
		return nil, executor.WithReason(executor.CodeSessionNotActive, executor.ReasonTurnInactive, "").WithDetail("the turn ended")
	}
	if err := t.sink.Append(ctx, p.Events); err != nil {
		return nil, err
	}
	t.next += int64(len(p.Events))
	return executor.SessionEventResult{NextSequence: t.next}, nil
}

// refreshToken answers model_token.refresh and tools_token.refresh.
func (c *hubConn) refreshToken(ctx context.Context, method string, params json.RawMessage) (any, error) {
	var p executor.TokenRefreshParams
	if err := executor.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	t, err := c.turn(p.SessionID, p.TurnID)
	if err != nil {
		return nil, err
	}
	refresh := t.sink.RefreshToolsToken
	if method == executor.MethodModelTokenRefresh {
		refresh = t.sink.RefreshModelToken
	}
	g, err := refresh(ctx)
	if err != nil {
		return nil, err
	}
	return c.resolve(&g), nil
}

// resolve returns a copy of g whose path URLs are resolved against the
// base URL the agent end reached the server at.
func (c *hubConn) resolve(g *executor.TokenGrant) *executor.TokenGrant {
	if g == nil {
		return nil
	}
	out := *g
	for _, u := range []*string{&out.BaseURL, &out.URL} {
		if strings.HasPrefix(*u, "/") && c.base != "" {
			*u = c.base + *u
		}
	}
	return &out
}
