package executor

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// clientSession is an assigned session on the executor.
type clientSession struct {
	a    Assignment
	sess Session

	mu     sync.Mutex                    // guards the fields below
	calls  map[string]context.CancelFunc // running tool calls
	seen   map[string]bool               // the tool_call_ids accepted lately
	order  recentIDs                     // seen ids
	closed bool
}

// maxSeenCalls bounds the tool_call_ids a session remembers to refuse a
// second run. The hub resends only calls it has no result for, and keeps
// as many results (4096) for its own deduplication.
const maxSeenCalls = 4096

// rememberLocked records an accepted tool_call_id, forgetting the oldest
// beyond maxSeenCalls.
func (s *clientSession) rememberLocked(id string) {
	s.seen[id] = true
	if old := s.order.add(id, maxSeenCalls); old != "" {
		delete(s.seen, old)
	}
}

// close cancels the session's calls and closes its tool host.
func (s *clientSession) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, cancel := range s.calls {
		cancel()
	}
	s.mu.Unlock()
	s.sess.Close()
}

func (c *Client) handle(ctx context.Context, conn *Conn, method string, params json.RawMessage) (any, error) {
	switch method {
	case MethodSessionAssign:
		return c.assign(ctx, params)
	case MethodSessionRelease:
		var p ReleaseParams
		if err := DecodeParams(params, &p); err != nil {
			return nil, err
		}
		c.mu.Lock()
		s := c.sessions[p.SessionID]
		if s != nil && (p.LeaseID == "" || s.a.LeaseID == p.LeaseID) {
			delete(c.sessions, p.SessionID)
			c.dropResultsLocked(p.SessionID)
			c.wg.Go(s.close)
			c.emit(Event{Type: EventSessionReleased, SessionID: p.SessionID})
		}
		c.mu.Unlock()
		return nil, nil
	case MethodToolCall:
		return c.toolCall(conn, params)
	case MethodTurnStart:
		return c.turnStart(ctx, conn, params)
	case MethodTurnCancel:
		return c.turnCancel(params)
	case MethodToolCancel:
		var p ToolCancelParams
		if err := DecodeParams(params, &p); err != nil {
			return nil, err
		}
		if s := c.session(p.SessionID); s != nil {
			s.mu.Lock()
			if cancel := s.calls[p.ToolCallID]; cancel != nil {
				cancel()
			}
			s.mu.Unlock()
		}
		return nil, nil
	case MethodClose:
		var p CloseParams
		json.Unmarshal(params, &p)
		c.logger.Info("harness is closing the connection", "code", p.Code, "reason", p.Reason)
		return nil, nil
	case MethodProcessStart, MethodProcessSignal:
		return c.process(ctx, method, params)
	case MethodTerminalOpen, MethodTerminalInput, MethodTerminalResize, MethodTerminalClose:
		return c.terminal(ctx, method, params)
	}
	return nil, errMethodNotFound
}

func (c *Client) session(id string) *clientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *Client) assign(ctx context.Context, params json.RawMessage) (any, error) {
	var a Assignment
	if err := DecodeParams(params, &a); err != nil {
		return nil, err
	}
	if a.SessionID == "" || a.LeaseID == "" {
		return nil, NewRPCError(CodeInvalidParams, "").WithDetail("session_id and lease_id are required")
	}
	for _, t := range a.Tools {
		if !slices.Contains(c.opts.Capabilities, ToolCapability(t)) {
			return AssignResult{Accepted: false, Reason: ReasonSessionRejected}, nil
		}
	}
	c.mu.Lock()
	if s := c.sessions[a.SessionID]; s != nil {
		s.mu.Lock()
		s.a = a // a new lease for a session already here
		s.mu.Unlock()
		c.mu.Unlock()
		return AssignResult{Accepted: true}, nil
	}
	if len(c.sessions) >= c.opts.MaxSessions {
		c.mu.Unlock()
		return AssignResult{Accepted: false, Reason: "executor_busy"}, nil
	}
	c.mu.Unlock()
	sess, err := c.opts.Sessions.OpenSession(ctx, a)
	if err != nil {
		reason, msg := ReasonWorkspaceUnavailable, err.Error()
		var re *RPCError
		if errors.As(err, &re) {
			if re.Reason() != "" {
				reason = re.Reason()
			}
			msg = re.Message
		}
		c.logger.Warn("session refused", "session", a.SessionID, "err", err)
		return AssignResult{Accepted: false, Reason: reason, Message: msg}, nil
	}
	s := &clientSession{a: a, sess: sess, calls: make(map[string]context.CancelFunc), seen: make(map[string]bool)}
	c.mu.Lock()
	if c.stopped || len(c.sessions) >= c.opts.MaxSessions || c.sessions[a.SessionID] != nil {
		c.mu.Unlock()
		sess.Close()
		return AssignResult{Accepted: false, Reason: "executor_busy"}, nil
	}
	c.sessions[a.SessionID] = s
	c.mu.Unlock()
	c.emit(Event{Type: EventSessionAssigned, SessionID: a.SessionID})
	return AssignResult{Accepted: true}, nil
}

// resultInAckWindow is how long a tool call may run before its tool.call is
// acknowledged without the result, when the harness accepts results in
// acknowledgements ([FeatureResultInAck]).
const resultInAckWindow = 20 * time.Millisecond

// toolCall starts a tool call. It runs in the read loop, so the tool runs
// in a goroutine of its own. When the harness accepts results in
// acknowledgements, the acknowledgement waits up to resultInAckWindow and
// carries the result of a call that finished by then: two frames per call
// instead of four.
func (c *Client) toolCall(conn *Conn, params json.RawMessage) (any, error) {
	var p ToolCallParams
	if err := DecodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.ToolCallID == "" || p.Name == "" {
		return nil, NewRPCError(CodeInvalidParams, "").WithDetail("tool_call_id and name are required")
	}
	s := c.session(p.SessionID)
	if s == nil {
		return nil, NewRPCError(CodeSessionNotActive, "").WithDetail("the session is not assigned to this executor")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.a.LeaseID != p.LeaseID {
		return nil, NewRPCError(CodeLeaseExpired, "").WithDetail("the lease is not current")
	}
	if !declaresTool(c.opts.Capabilities, p.Name) {
		e := NewRPCError(CodeCapabilityUnavailable, "")
		e.Data = &JSONRPCErrorData{Capability: ToolCapability(p.Name), Detail: "tool " + p.Name + " is not declared"}
		return nil, e
	}
	if s.seen[p.ToolCallID] || s.calls[p.ToolCallID] != nil || s.closed {
		return ToolCallAck{Accepted: true}, nil // already running or done: never run twice
	}
	c.mu.Lock()
	if c.outbox[p.ToolCallID] != nil {
		c.mu.Unlock()
		return ToolCallAck{Accepted: true}, nil // done, its result not yet acknowledged
	}
	if c.running >= c.opts.MaxConcurrentCalls {
		c.mu.Unlock()
		return nil, NewRPCError(CodeExecutorBusy, "").WithDetail("too many tool calls in flight")
	}
	c.running++
	inAck := c.inAck && c.conn == conn
	c.mu.Unlock()
	s.rememberLocked(p.ToolCallID)
	ctx, cancel := context.WithCancel(context.Background())
	if p.TimeoutMS > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), time.Duration(p.TimeoutMS)*time.Millisecond)
	}
	s.calls[p.ToolCallID] = cancel
	if !inAck {
		c.wg.Go(func() { c.finishCall(ctx, cancel, s, p, nil, nil) })
		return ToolCallAck{Accepted: true}, nil
	}
	return replyLater(func(answer func(any, error) error) {
		claim := new(atomic.Bool) // whoever answers tool.call first
		ack := time.AfterFunc(resultInAckWindow, func() {
			if claim.CompareAndSwap(false, true) {
				answer(ToolCallAck{Accepted: true}, nil)
			}
		})
		c.wg.Go(func() {
			c.finishCall(ctx, cancel, s, p, conn, func(r *ToolResult) bool {
				if !claim.CompareAndSwap(false, true) {
					return false
				}
				ack.Stop()
				return answer(ToolCallAck{Accepted: true, Result: r}, nil) == nil
			})
		})
	}), nil
}

// finishCall runs a tool call and sends its result: in the tool.call
// acknowledgement on conn if inAck (not nil) manages it, else as tool.result.
func (c *Client) finishCall(ctx context.Context, cancel context.CancelFunc, s *clientSession, p ToolCallParams, conn *Conn, inAck func(*ToolResult) bool) {
	defer cancel()
	c.emit(Event{Type: EventToolStarted, SessionID: p.SessionID, ToolCallID: p.ToolCallID, Tool: p.Name})
	res := c.runTool(ctx, s, p)
	if res.Content == nil {
		res.Content = []ContentBlock{}
	}
	c.emit(Event{Type: EventToolFinished, SessionID: p.SessionID, ToolCallID: p.ToolCallID, Tool: p.Name, Result: &res})
	s.mu.Lock()
	delete(s.calls, p.ToolCallID)
	s.mu.Unlock()
	r := ToolResultParams{SessionID: p.SessionID, ToolCallID: p.ToolCallID, ToolResult: res}
	c.mu.Lock()
	c.running--
	if c.sessions[p.SessionID] != s {
		c.mu.Unlock()
		return
	}
	// The result stays in the outbox until acknowledged, so that it is
	// sent again after a reconnect.
	e := &outboxEntry{r: r}
	if inAck != nil {
		e.ackConn = conn
	}
	c.outbox[p.ToolCallID] = e
	c.mu.Unlock()
	if inAck != nil {
		sent := inAck(&r.ToolResult)
		c.mu.Lock()
		if sent {
			c.ackedLocked(e)
			c.mu.Unlock()
			return
		}
		e.ackConn = nil // acknowledged without it, or not sent: send it as tool.result
		c.mu.Unlock()
	}
	c.mu.Lock()
	current := c.conn
	c.mu.Unlock()
	if current != nil {
		c.deliverAsync(current, r)
	}
}

// declaresTool reports whether caps holds "tool:"+name (without building
// that string on every call).
func declaresTool(caps []string, name string) bool {
	const prefix = "tool:"
	for _, c := range caps {
		if len(c) == len(prefix)+len(name) && c[:len(prefix)] == prefix && c[len(prefix):] == name {
			return true
		}
	}
	return false
}

func (c *Client) runTool(ctx context.Context, s *clientSession, p ToolCallParams) ToolResult {
	if c.opts.Confirm != nil && c.opts.Mutating(p.Name) {
		cctx, cancel := context.WithTimeout(ctx, c.opts.ConfirmTimeout)
		ok, err := c.opts.Confirm(cctx, ConfirmRequest{SessionID: p.SessionID, ToolCallID: p.ToolCallID, Tool: p.Name, Input: p.Input})
		expired := err != nil || cctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return cancelResult(ctx)
		case expired:
			return ToolResult{IsError: true, ErrorCode: ReasonLocalConfirmationExpired,
				Content: []ContentBlock{TextBlock("the person at the executor did not confirm the call in time")}}
		case !ok:
			return ToolResult{IsError: true, ErrorCode: ReasonLocalConfirmationDenied,
				Content: []ContentBlock{TextBlock("the person at the executor denied the call")}}
		}
	}
	res := s.sess.CallTool(ctx, p.Name, p.Input)
	if ctx.Err() != nil && !res.IsError {
		return cancelResult(ctx)
	}
	return res
}

func cancelResult(ctx context.Context) ToolResult {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ToolResult{IsError: true, ErrorCode: "timeout", Content: []ContentBlock{TextBlock("the tool call timed out")}}
	}
	return ToolResult{IsError: true, ErrorCode: "canceled", Content: []ContentBlock{TextBlock("the tool call was canceled")}}
}

func (c *Client) process(ctx context.Context, method string, params json.RawMessage) (any, error) {
	var ref struct {
		SessionID string `json:"session_id"`
	}
	if err := DecodeParams(params, &ref); err != nil {
		return nil, err
	}
	s := c.session(ref.SessionID)
	if s == nil {
		return nil, NewRPCError(CodeSessionNotActive, "")
	}
	ph, ok := s.sess.(ProcessHost)
	if !ok || !slices.Contains(c.opts.Capabilities, CapabilityProcess) {
		e := NewRPCError(CodeCapabilityUnavailable, "")
		e.Data = &JSONRPCErrorData{Capability: CapabilityProcess}
		return nil, e
	}
	if method == MethodProcessSignal {
		var p ProcessSignal
		if err := DecodeParams(params, &p); err != nil {
			return nil, err
		}
		return ph.SignalProcess(ctx, p)
	}
	var p ProcessStart
	if err := DecodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.Spec.PTY != nil && !slices.Contains(c.opts.Capabilities, CapabilityProcessPTY) {
		e := NewRPCError(CodeCapabilityUnavailable, "")
		e.Data = &JSONRPCErrorData{Capability: CapabilityProcessPTY}
		return nil, e
	}
	return ph.StartProcess(ctx, p, func(e ProcessExit) { c.notifyCurrent(MethodProcessExit, e) })
}

func (c *Client) terminal(ctx context.Context, method string, params json.RawMessage) (any, error) {
	var ref TerminalRef
	if err := DecodeParams(params, &ref); err != nil {
		return nil, err
	}
	s := c.session(ref.SessionID)
	if s == nil {
		return nil, NewRPCError(CodeSessionNotActive, "")
	}
	th, ok := s.sess.(TerminalHost)
	if !ok || !slices.Contains(c.opts.Capabilities, CapabilityProcessPTY) {
		e := NewRPCError(CodeCapabilityUnavailable, "")
		e.Data = &JSONRPCErrorData{Capability: CapabilityProcessPTY, TerminalCode: "pty_unavailable"}
		return nil, e
	}
	switch method {
	case MethodTerminalOpen:
		var p TerminalOpen
		if err := DecodeParams(params, &p); err != nil {
			return nil, err
		}
		return th.OpenTerminal(ctx, p,
			func(o TerminalOutput) { c.notifyCurrent(MethodTerminalOutput, o) },
			func(e TerminalExit) { c.notifyCurrent(MethodTerminalExit, e) })
	case MethodTerminalInput:
		var p TerminalInput
		if err := DecodeParams(params, &p); err != nil {
			return nil, err
		}
		return struct{}{}, th.WriteTerminal(ctx, p)
	case MethodTerminalResize:
		var p TerminalResize
		if err := DecodeParams(params, &p); err != nil {
			return nil, err
		}
		return struct{}{}, th.ResizeTerminal(ctx, p)
	default:
		return struct{}{}, th.CloseTerminal(ctx, ref)
	}
}

// notifyCurrent sends a notification over the current connection, if any.
func (c *Client) notifyCurrent(method string, params any) {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), WriteTimeout)
	defer cancel()
	conn.Notify(ctx, method, params)
}
