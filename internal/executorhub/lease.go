package executorhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// AssignRequest asks the hub to place a session on an executor.
type AssignRequest struct {
	EnvironmentID string
	SessionID     string
	// Tools are the tools the session needs; the executor must declare
	// "tool:<name>" for each.
	Tools []string
	// ReadOnly asks for a read-only workspace.
	ReadOnly bool
	// MachineID, if set, places the session on an executor of that
	// machine (a machine-scoped executor) instead of one of the
	// environment.
	MachineID string
	// Env is passed to the executor with the assignment (the session's
	// credentials as environment variables).
	Env map[string]string
	// Memory and SessionsToken are passed to the executor with the
	// assignment: the session's memory stores, and the credential with
	// which it syncs them.
	Memory        []executor.MemoryMount
	SessionsToken string
}

func (r AssignRequest) scope() string {
	return principal{EnvironmentID: r.EnvironmentID, MachineID: r.MachineID}.scope()
}

type leaseState int

const (
	leaseAssigning leaseState = iota
	leaseActive
	leaseEnded // released by the harness
	leaseLost  // expired, or the executor is gone
)

// Lease is a session placed on an executor. Its methods are safe for
// concurrent use. A lease ends when the harness releases it or when it is
// lost (expiry, executor closed, restarted executor, hub shutdown); Done is
// then closed and Err says why.
type Lease struct {
	// SessionID is the session the lease is for.
	SessionID string
	// LeaseID identifies this placement of the session.
	LeaseID string
	// EnvironmentID is the session's environment.
	EnvironmentID string
	// ExecutorID is the executor the session was placed on.
	ExecutorID string

	h        *Hub
	identity string
	scope    string // where it was placed, for change broadcasts
	done     chan struct{}

	// guarded by h.mu
	conn      *hubConn
	state     leaseState
	err       error
	expiresAt time.Time
	timer     *time.Timer
	idle      bool // its session is idle: the slot may go to another session
	calls     map[string]*toolCall
	results   recent[tool.Result] // by tool call id, for deduplication
}

type toolCall struct {
	params  executor.ToolCallParams
	done    chan struct{}
	result  tool.Result
	err     error
	retries int // times the executor refused it as busy (guarded by h.mu)
}

// Assign places a session on a registered executor of the environment
// whose capabilities cover the requested tools and who has room, and sends
// it session.assign. An executor that answers accepted=false (for example
// session_rejected or workspace_unavailable) is passed over for the next
// candidate. Assign fails with [ErrNoExecutor] when no executor can take
// the session now (wait on [Hub.Changed] and try again), and with an error
// wrapping [ErrAssignRejected] when every candidate rejected it.
func (h *Hub) Assign(ctx context.Context, req AssignRequest) (*Lease, error) {
	if req.SessionID == "" || req.EnvironmentID == "" {
		return nil, errors.New("executor: Assign needs a session and an environment")
	}
	var rejected map[*hubConn]bool
	var rejection error
	for {
		l, c, err := h.assignOnce(ctx, req, rejected)
		switch {
		case errors.Is(err, ErrAssignRejected):
			if rejected == nil {
				rejected = make(map[*hubConn]bool)
			}
			rejected[c] = true
			rejection = err
			continue
		case errors.Is(err, ErrNoExecutor) && rejection != nil:
			return nil, rejection
		}
		return l, err
	}
}

// assignOnce places the session on the best executor not in skip and
// returns the lease, or the error and the executor that refused.
func (h *Hub) assignOnce(ctx context.Context, req AssignRequest, skip map[*hubConn]bool) (*Lease, *hubConn, error) {
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: the hub is shutting down", ErrNoExecutor)
	}
	if l := h.leases[req.SessionID]; l != nil {
		h.mu.Unlock()
		return nil, nil, fmt.Errorf("executor: session %s already has lease %s", req.SessionID, l.LeaseID)
	}
	c, yielded := h.pickLocked(req, skip)
	if c == nil {
		h.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: %s", ErrNoExecutor, req.scope())
	}
	now := h.opts.Now()
	l := &Lease{
		SessionID:     req.SessionID,
		LeaseID:       newID("lease_"),
		EnvironmentID: req.EnvironmentID,
		ExecutorID:    c.id,
		h:             h,
		identity:      c.identity,
		scope:         req.scope(),
		done:          make(chan struct{}),
		conn:          c,
		state:         leaseAssigning,
		expiresAt:     now.Add(h.opts.LeaseTTL),
		calls:         make(map[string]*toolCall),
	}
	h.leases[req.SessionID] = l
	c.leases[req.SessionID] = l
	h.mu.Unlock()

	if yielded != nil {
		// Released before the assignment, on the same connection: the
		// executor reads frames in order, so the slot is free when the
		// assignment arrives.
		rctx, cancel := context.WithTimeout(ctx, executor.WriteTimeout)
		c.rpc.Notify(rctx, executor.MethodSessionRelease, executor.ReleaseParams{SessionID: yielded.SessionID, LeaseID: yielded.LeaseID, Reason: executor.ReleaseEnded})
		cancel()
	}
	var res executor.AssignResult
	err := c.rpc.Call(ctx, executor.MethodSessionAssign, executor.Assignment{
		SessionID: l.SessionID, LeaseID: l.LeaseID, LeaseExpiresAt: l.expiresAt,
		EnvironmentID: l.EnvironmentID, Workspace: executor.WorkspaceSpec{ReadOnly: req.ReadOnly}, Tools: req.Tools, Env: req.Env,
		Memory: req.Memory, SessionsToken: req.SessionsToken,
	}, &res)
	if err == nil && !res.Accepted {
		err = fmt.Errorf("%w: %s", ErrAssignRejected, res.Reason)
		if res.Message != "" {
			err = fmt.Errorf("%w: %s", err, res.Message)
		}
		h.logger.Info("session.assign rejected", "session", req.SessionID, "executor", c.info.Name, "err", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil && l.state == leaseAssigning {
		l.state = leaseActive
		l.timer = time.AfterFunc(h.opts.LeaseTTL, l.checkExpiry)
		return l, c, nil
	}
	if err == nil {
		err = l.err
	}
	if h.leases[l.SessionID] == l {
		delete(h.leases, l.SessionID)
	}
	if l.conn != nil {
		delete(l.conn.leases, l.SessionID)
	}
	if l.state == leaseAssigning {
		l.state = leaseLost
		l.err = err
		close(l.done)
	}
	h.broadcastLocked(l.scope)
	return nil, c, err
}

// pickLocked chooses the executor for req, of those not in skip: the
// least loaded one with a free slot, else one whose slot an idle session
// yields (that lease ends here; the caller tells the executor). It
// returns nil when none can take the session.
func (h *Hub) pickLocked(req AssignRequest, skip map[*hubConn]bool) (c *hubConn, yielded *Lease) {
	var free, full []*hubConn
	for c := range h.byScope[req.scope()] {
		if skip[c] || slices.ContainsFunc(req.Tools, func(t string) bool { return !c.has(executor.ToolCapability(t)) }) {
			continue
		}
		if len(c.leases) < c.maxSessions {
			free = append(free, c)
		} else {
			full = append(full, c)
		}
	}
	if len(free) > 0 {
		slices.SortFunc(free, func(a, b *hubConn) int { return len(a.leases) - len(b.leases) })
		return free[0], nil
	}
	for _, c := range full {
		for _, l := range c.leases {
			if l.idle && l.state == leaseActive {
				h.endLeaseLocked(l, leaseEnded, fmt.Errorf("%w: its idle session yielded the executor to session %s", executor.ErrSessionEnded, req.SessionID), "")
				return c, l
			}
		}
	}
	return nil, nil
}

// Idle marks the lease's session idle: until [Lease.Resume], the hub may
// end the lease to give its executor slot to another session. A harness
// calls it when the session's turn ends, so that an executor with one
// slot serves the next session at once instead of when the lease of an
// idle one ends.
func (l *Lease) Idle() {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.state != leaseActive || l.idle {
		return
	}
	l.idle = true
	h.broadcastLocked(l.scope) // an assignment waiting for a slot may take it
}

// Resume takes back a lease marked [Lease.Idle] before the session's next
// tool call. It reports false when the lease has ended meanwhile (its
// slot went to another session): place the session again.
func (l *Lease) Resume() bool {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.state != leaseActive {
		return false
	}
	l.idle = false
	return true
}

// Yield ends a lease marked [Lease.Idle] and not resumed since, handing
// its executor slot back (session.release with reason "ended"); it
// reports whether it did. A harness that shares its own capacity among
// sessions calls it to take the slot of an idle session for another.
func (l *Lease) Yield() bool {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.state != leaseActive || !l.idle {
		return false
	}
	h.endLeaseLocked(l, leaseEnded, fmt.Errorf("%w: its idle session yielded its slot", executor.ErrSessionEnded), executor.ReleaseEnded)
	return true
}

func (l *Lease) renewLocked(now time.Time) {
	l.expiresAt = now.Add(l.h.opts.LeaseTTL)
	if l.timer != nil {
		l.timer.Reset(l.h.opts.LeaseTTL)
	}
}

func (l *Lease) checkExpiry() {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.state != leaseActive {
		return
	}
	if wait := l.expiresAt.Sub(h.opts.Now()); wait > 0 {
		l.timer.Reset(wait)
		return
	}
	h.expired.put(l.SessionID, l.LeaseID)
	h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the lease expired", ErrToolOutcomeUnknown), executor.ReleaseLeaseExpired)
}

// endLeaseLocked ends a lease: pending tool calls end with
// ErrToolOutcomeUnknown and, when releaseReason is set and the executor is
// connected, it is told with session.release.
func (h *Hub) endLeaseLocked(l *Lease, state leaseState, cause error, releaseReason string) {
	if l.state == leaseEnded || l.state == leaseLost {
		return
	}
	l.state = state
	l.err = cause
	if l.timer != nil {
		l.timer.Stop()
	}
	if h.leases[l.SessionID] == l {
		delete(h.leases, l.SessionID)
	}
	outcome := cause
	if !errors.Is(outcome, ErrToolOutcomeUnknown) {
		outcome = fmt.Errorf("%w: %w", ErrToolOutcomeUnknown, cause)
	}
	for id, tc := range l.calls {
		tc.err = outcome
		close(tc.done)
		delete(l.calls, id)
	}
	conn := l.conn
	if conn != nil {
		delete(conn.leases, l.SessionID)
		l.conn = nil
		if releaseReason != "" {
			h.wg.Add(1)
			go func() { // owned by the hub: Stop waits for it
				defer h.wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), executor.WriteTimeout)
				defer cancel()
				conn.rpc.Notify(ctx, executor.MethodSessionRelease, executor.ReleaseParams{SessionID: l.SessionID, LeaseID: l.LeaseID, Reason: releaseReason})
			}()
		}
	}
	close(l.done)
	h.broadcastLocked(l.scope)
}

// Done is closed when the lease has ended.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns why the lease ended, or nil while it is active: an error
// wrapping [ErrSessionEnded] after Release, or [ErrToolOutcomeUnknown]
// when the executor was lost.
func (l *Lease) Err() error {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	return l.err
}

// CallTool runs a tool call on the lease's executor and waits for its
// result. A tool that ran and failed is a result with IsError set. A
// call the executor refuses as busy (-32009 executor_busy, or a retryable
// -32011) is sent again with a backoff (50 ms doubling to 2 s) until ctx
// ends. The error is an *RPCError for a protocol failure (-32012 tool not
// declared, -32003 lease expired, …), wraps [ErrToolOutcomeUnknown] when the
// executor was lost before the result arrived, wraps [ErrSessionEnded] on
// a lease that has ended, or is ctx's error (the call is then canceled
// with tool.cancel; calling again with the same ID collects its result).
//
// The call's Timeout is passed to the executor as timeout_ms.
func (l *Lease) CallTool(ctx context.Context, call tool.Call) (tool.Result, error) {
	if call.ID == "" || call.Name == "" {
		return tool.Result{}, errors.New("executor: a tool call needs an ID and a name")
	}
	if len(call.Input) == 0 {
		call.Input = json.RawMessage("{}")
	}
	h := l.h
	h.mu.Lock()
	if r, ok := l.results.get(call.ID); ok {
		h.mu.Unlock()
		return r, nil
	}
	if l.state != leaseActive {
		err := l.err
		h.mu.Unlock()
		return tool.Result{}, fmt.Errorf("%w: %w", executor.ErrSessionEnded, err)
	}
	tc := l.calls[call.ID]
	var conn *hubConn
	if tc == nil {
		tc = &toolCall{
			params: executor.ToolCallParams{SessionID: l.SessionID, LeaseID: l.LeaseID, ToolCallID: call.ID,
				Name: call.Name, Input: call.Input, TimeoutMS: call.Timeout.Milliseconds()},
			done: make(chan struct{}),
		}
		l.calls[call.ID] = tc
		conn = l.conn
	}
	h.mu.Unlock()
	if conn != nil {
		l.send(ctx, conn, tc)
	}
	select {
	case <-tc.done:
		return tc.result, tc.err
	case <-ctx.Done():
		h.mu.Lock()
		conn := l.conn
		if tc.retries > 0 && l.calls[call.ID] == tc {
			// Refused as busy and waiting to be sent again: it is not
			// running, and a call with the same ID sends it anew.
			delete(l.calls, call.ID)
			tc.err = ctx.Err()
			close(tc.done)
		}
		h.mu.Unlock()
		if conn != nil {
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), executor.WriteTimeout)
			conn.rpc.Notify(nctx, executor.MethodToolCancel, executor.ToolCancelParams{SessionID: l.SessionID, ToolCallID: call.ID, Reason: "canceled"})
			cancel()
		}
		return tool.Result{}, ctx.Err()
	}
}

// send delivers a tool.call without waiting for its acknowledgement. A
// protocol error ends the call with that error; a lost connection leaves
// it pending, to be sent again when the executor resumes the session.
func (l *Lease) send(ctx context.Context, conn *hubConn, tc *toolCall) {
	conn.rpc.CallAsync(ctx, executor.MethodToolCall, tc.params, func(ack json.RawMessage, err error) {
		h := l.h
		if err == nil {
			// The result may have come with the acknowledgement.
			var a executor.ToolCallAck
			if executor.DecodeParams(ack, &a) != nil || a.Result == nil {
				return
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.leases[l.SessionID] == l && l.state == leaseActive {
				l.acceptResultLocked(tc.params.ToolCallID, *a.Result)
			}
			return
		}
		var re *executor.RPCError
		if !errors.As(err, &re) {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if l.calls[tc.params.ToolCallID] != tc {
			return
		}
		if busy(re) && l.state == leaseActive && ctx.Err() == nil {
			// Out of slots on the executor: the call did not start. Send
			// it again after a backoff, while the caller waits.
			tc.retries++
			delay := min(busyRetryMin<<min(tc.retries-1, 10), busyRetryMax)
			h.logger.Debug("tool.call refused as busy; sending it again", "session", l.SessionID, "tool_call", tc.params.ToolCallID, "in", delay, "err", re)
			time.AfterFunc(delay, func() { l.resend(ctx, tc) })
			return
		}
		delete(l.calls, tc.params.ToolCallID)
		tc.err = re
		close(tc.done)
	})
}

// Bounds of the backoff before a tool.call refused as busy is sent again.
const (
	busyRetryMin = 50 * time.Millisecond
	busyRetryMax = 2 * time.Second
)

// busy reports whether a tool.call refusal says the executor is out of
// slots for now (-32009 executor_busy, -32011 resource_unavailable, with
// data.retryable): the call did not start and may be sent again.
func busy(re *executor.RPCError) bool {
	return re.Retryable() && (re.Code == executor.CodeExecutorBusy || re.Code == executor.CodeResourceUnavailable)
}

// resend sends a tool call refused as busy again, unless it ended
// meanwhile (its caller gave up, or the lease ended).
func (l *Lease) resend(ctx context.Context, tc *toolCall) {
	h := l.h
	h.mu.Lock()
	if l.calls[tc.params.ToolCallID] != tc || l.state != leaseActive {
		h.mu.Unlock()
		return
	}
	conn := l.conn
	h.mu.Unlock()
	if conn != nil { // else the executor resumes the lease and gets it then
		l.send(ctx, conn, tc)
	}
}

// acceptResultLocked records the result of a tool call, as the tool
// contract has it, and wakes its caller. It reports false for a result
// already received (a duplicate).
func (l *Lease) acceptResultLocked(id string, wire executor.ToolResult) bool {
	if _, ok := l.results.get(id); ok {
		return false
	}
	r := fromWire(wire)
	l.results.put(id, r)
	if tc := l.calls[id]; tc != nil {
		delete(l.calls, id)
		tc.result = r
		close(tc.done)
	}
	return true
}

// resendPending sends the calls still waiting for a result to the
// connection that resumed the lease; the executor deduplicates them.
func (l *Lease) resendPending(conn *hubConn) {
	h := l.h
	h.mu.Lock()
	calls := make([]*toolCall, 0, len(l.calls))
	for _, tc := range l.calls {
		calls = append(calls, tc)
	}
	h.mu.Unlock()
	for _, tc := range calls {
		l.send(context.Background(), conn, tc)
	}
}

// Call sends a request of the session to its executor, for process.* and
// terminal.* methods; result is decoded unless nil. It fails with
// [ErrNotConnected] while the executor is disconnected and with an error
// wrapping [ErrSessionEnded] after the lease ended.
func (l *Lease) Call(ctx context.Context, method string, params, result any) error {
	h := l.h
	h.mu.Lock()
	state, conn, err := l.state, l.conn, l.err
	h.mu.Unlock()
	if state != leaseActive {
		return fmt.Errorf("%w: %w", executor.ErrSessionEnded, err)
	}
	if conn == nil {
		return executor.ErrNotConnected
	}
	return conn.rpc.Call(ctx, method, params, result)
}

// Release ends the session on its executor (session.release with reason
// "ended"). Tool calls still waiting end with [ErrToolOutcomeUnknown];
// later calls fail with [ErrSessionEnded].
func (l *Lease) Release(ctx context.Context) error {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLeaseLocked(l, leaseEnded, executor.ErrSessionEnded, executor.ReleaseEnded)
	return nil
}

// WaitAssign is [Hub.Assign] that waits, until ctx ends, while no executor
// can take the session: a session of a self-hosted environment without a
// connected executor (the harness shows it as "rescheduling") starts as
// soon as one registers or frees a slot. Other errors, including
// [ErrAssignRejected], are returned at once.
func (h *Hub) WaitAssign(ctx context.Context, req AssignRequest) (*Lease, error) {
	for {
		changed := h.changedFor(req.scope())
		l, err := h.Assign(ctx, req)
		if !errors.Is(err, ErrNoExecutor) {
			return l, err
		}
		h.mu.Lock()
		draining := h.draining
		h.mu.Unlock()
		if draining {
			return nil, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waiting: %w)", err, ctx.Err())
		}
	}
}

// fromWire converts a tool result off the wire into the tool contract's:
// the one boundary between the protocol's types and the server's.
func fromWire(r executor.ToolResult) tool.Result {
	out := tool.Result{IsError: r.IsError, ErrorCode: r.ErrorCode, Content: make([]ma.ContentBlock, 0, len(r.Content))}
	for _, b := range r.Content {
		out.Content = append(out.Content, ma.ContentBlock{Type: b.Type, Text: b.Text})
	}
	return out
}
