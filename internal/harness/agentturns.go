package harness

import (
	"context"
	"encoding/json"

	ma "github.com/reinsdev/reins/managedagents"
)

// ActiveTurn is an agent-end turn running on this process. The HTTP
// endpoints that hold a token of the turn (the platform tools endpoint,
// the model gateway) reach it through [Harness.AgentTurn] and hand it
// work, which the session's runner does through its one write path.
type ActiveTurn struct {
	SessionID, TurnID string

	calls chan toolCallRequest // read by the runner's turn loop
	gone  chan struct{}        // closed when the turn is over

	model      string         // the session agent's model id
	modelCalls chan agentCall // the model gateway's writes (gateway.go)
	// openSpans are the gateway's model request spans not closed yet;
	// only the runner's goroutine touches it.
	openSpans map[string]bool
}

// Done is closed when the turn is over.
func (t *ActiveTurn) Done() <-chan struct{} { return t.gone }

// PlatformToolCall is a call of the platform tools endpoint: a built-in
// tool of the session's agent, run on the session's hands.
type PlatformToolCall struct {
	Name  string
	Input json.RawMessage
	// Approval, if set, is the id of the agent.tool_use that an earlier
	// call recorded (answered approval_required) and that the user has
	// confirmed since: the call answers the tool's result.
	Approval string
	// Started, if set, is called with the id of the agent.tool_use as
	// soon as it is in the log, before the tool runs.
	Started func(toolUseID string)
}

// PlatformToolResult is the outcome of a PlatformToolCall: the tool's
// result, or a refusal with its error code (ToolError*).
type PlatformToolResult struct {
	// ToolUseID is the agent.tool_use the call recorded ("" when it
	// recorded none).
	ToolUseID string
	Content   []ma.ContentBlock
	IsError   bool
	ErrorCode string
}

type toolCallRequest struct {
	call  PlatformToolCall
	reply chan toolCallReply
}

type toolCallReply struct {
	res PlatformToolResult
	err error
}

// CallTool hands the call to the turn's runner and returns its outcome.
// ErrTurnInactive: the turn ended before the runner took the call. Once
// taken, the call is carried out even if ctx ends (the wait for it does
// not).
func (t *ActiveTurn) CallTool(ctx context.Context, call PlatformToolCall) (PlatformToolResult, error) {
	req := toolCallRequest{call: call, reply: make(chan toolCallReply, 1)}
	r, err := askRunner(ctx, t.calls, req, req.reply, t.gone)
	if err != nil {
		return PlatformToolResult{}, err
	}
	return r.res, r.err
}

// AgentTurn returns the agent-end turn turnID of the session if it runs
// on this process, else ErrTurnInactive.
func (h *Harness) AgentTurn(sessionID, turnID string) (*ActiveTurn, error) {
	h.mu.Lock()
	t := h.turns[sessionID]
	h.mu.Unlock()
	if t == nil || t.TurnID != turnID {
		return nil, ErrTurnInactive
	}
	select {
	case <-t.gone:
		return nil, ErrTurnInactive
	default:
	}
	return t, nil
}

// addTurn registers a turn of the agent model starting on an agent end; the returned func
// ends it and forgets it.
func (h *Harness) addTurn(sessionID, turnID, model string) (*ActiveTurn, func()) {
	t := &ActiveTurn{SessionID: sessionID, TurnID: turnID, calls: make(chan toolCallRequest), gone: make(chan struct{}),
		model: model, modelCalls: make(chan agentCall), openSpans: map[string]bool{}}
	h.mu.Lock()
	if h.turns == nil {
		h.turns = make(map[string]*ActiveTurn)
	}
	h.turns[sessionID] = t
	h.mu.Unlock()
	return t, func() {
		h.mu.Lock()
		if h.turns[sessionID] == t {
			delete(h.turns, sessionID)
		}
		h.mu.Unlock()
		close(t.gone)
	}
}
