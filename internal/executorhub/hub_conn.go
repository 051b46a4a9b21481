package executorhub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/coder/websocket"
	"github.com/reinsdev/reins/executor"
)

// hubConn is the harness side of one executor connection.
type hubConn struct {
	h         *Hub
	rpc       *executor.Conn
	principal principal
	// credential is the hash of the environment key or machine token the
	// connection's token was exchanged for ("" for in-process executors).
	credential string
	local      bool // connected through the in-memory listener (NewLocal)
	// base is the server's base URL as the executor reached it: a
	// grant's URL that is a path is resolved against it.
	base string

	// guarded by h.mu
	registered  bool
	id          string
	identity    string
	info        executor.ExecutorInfo
	caps        []string
	features    []string // optional protocol features the executor declared
	maxSessions int
	leases      map[string]*Lease
	turns       map[string]*AgentTurn // agent-end turns by turn id
}

func (c *hubConn) has(capability string) bool { return slices.Contains(c.caps, capability) }

// close tells the executor why and closes the connection with code.
func (c *hubConn) close(code int, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.rpc.Notify(ctx, executor.MethodClose, executor.CloseParams{Code: code, Reason: reason})
	c.rpc.CloseWith(code, reason)
}

// goClose closes c in a goroutine owned by the hub (Stop waits for it).
// It is called while a connection handler runs, so the wait group is
// already positive.
func (h *Hub) goClose(c *hubConn, code int, reason string) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		c.close(code, reason)
	}()
}

// errMethodNotFound answers the methods the hub does not serve.
var errMethodNotFound = executor.NewRPCError(executor.CodeMethodNotFound, "")

func (c *hubConn) handle(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == executor.MethodRegister {
		return c.register(ctx, params)
	}
	c.h.mu.Lock()
	registered := c.registered
	c.h.mu.Unlock()
	if !registered {
		switch method {
		case executor.MethodHeartbeat, executor.MethodToolResult, executor.MethodProcessExit, executor.MethodTerminalOutput, executor.MethodTerminalExit,
			executor.MethodSessionEvent, executor.MethodModelTokenRefresh, executor.MethodToolsTokenRefresh:
			return nil, executor.NewRPCError(executor.CodeUnauthorized, "").WithDetail("executor.register first")
		}
		return nil, errMethodNotFound
	}
	switch method {
	case executor.MethodHeartbeat:
		return c.heartbeat(params)
	case executor.MethodSessionEvent:
		return c.sessionEvent(ctx, params)
	case executor.MethodModelTokenRefresh, executor.MethodToolsTokenRefresh:
		return c.refreshToken(ctx, method, params)
	case executor.MethodToolResult:
		return c.toolResult(params)
	case executor.MethodProcessExit, executor.MethodTerminalOutput, executor.MethodTerminalExit:
		var ref struct {
			SessionID string `json:"session_id"`
		}
		if err := executor.DecodeParams(params, &ref); err != nil {
			return nil, err
		}
		c.h.mu.Lock()
		l := c.leases[ref.SessionID]
		c.h.mu.Unlock()
		if l != nil && c.h.opts.OnNotification != nil {
			c.h.opts.OnNotification(Notification{EnvironmentID: l.EnvironmentID, SessionID: ref.SessionID, Method: method, Params: params})
		}
		return nil, nil
	}
	return nil, errMethodNotFound
}

func newID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (c *hubConn) register(ctx context.Context, params json.RawMessage) (any, error) {
	h := c.h
	var p executor.RegisterParams
	if err := executor.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	if err := c.admit(ctx, &p); err != nil {
		return nil, err
	}
	identity := c.principal.scope() + "/" + p.Executor.Name
	res := executor.RegisterResult{
		HeartbeatIntervalMS: h.opts.HeartbeatInterval.Milliseconds(),
		LeaseTTLMS:          h.opts.LeaseTTL.Milliseconds(),
		Resumed:             []string{},
		Lost:                []executor.LostSession{},
		Features:            []string{executor.FeatureResultInAck, executor.FeatureTranscriptDeltas},
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		h.goClose(c, executor.CloseDrained, "drained")
		return nil, executor.NewRPCError(executor.CodeResourceUnavailable, "").WithDetail("the hub is shutting down")
	}
	if c.registered {
		h.mu.Unlock()
		return nil, executor.NewRPCError(executor.CodeConflict, "").WithDetail("already registered")
	}
	old := h.byIdentity[identity]
	if old != nil {
		h.unregisterLocked(old)
	}
	c.registered = true
	c.id = newID("exec_")
	c.identity = identity
	c.info = p.Executor
	c.caps = p.Capabilities
	c.features = p.Features
	c.maxSessions = p.MaxSessions
	h.byIdentity[identity] = c
	scope := c.principal.scope()
	if h.byScope[scope] == nil {
		h.byScope[scope] = make(map[*hubConn]bool)
	}
	h.byScope[scope][c] = true
	resend := c.resumeLocked(p.Sessions, &res)
	res.ExecutorID = c.id
	h.broadcastLocked(c.principal.scope())
	h.broadcastLocked(anyScope)
	h.mu.Unlock()
	if old != nil {
		h.goClose(old, executor.CloseReplaced, "replaced")
	}
	h.logger.Info("executor registered", "executor", p.Executor.Name, "scope", c.principal.scope(), "capabilities", p.Capabilities, "resumed", len(res.Resumed))
	for _, l := range resend {
		l.resendPending(c)
	}
	return res, nil
}

// admit checks a registration before it takes effect: the protocol, the
// executor's name, a machine executor's capabilities and the host's
// AllowRegistration; it defaults MaxSessions to 1.
func (c *hubConn) admit(ctx context.Context, p *executor.RegisterParams) error {
	h := c.h
	if p.Protocol != executor.Subprotocol {
		return &executor.CloseAfterReply{
			Err:  executor.NewRPCError(executor.CodeUnsupportedProtocol, "").WithDetail(fmt.Sprintf("protocol %q is not spoken; use %q", p.Protocol, executor.Subprotocol)),
			Code: executor.CloseUnsupportedProtocol, Reason: "unsupported protocol",
		}
	}
	if p.Executor.Name == "" {
		return executor.NewRPCError(executor.CodeInvalidParams, "").WithDetail("executor.name is required")
	}
	if c.principal.MachineID != "" && !slices.Contains(p.Capabilities, executor.CapabilityProcess) && !slices.Contains(p.Capabilities, executor.CapabilityAgent) {
		e := executor.WithReason(executor.CodeCapabilityUnavailable, executor.ReasonCapabilityMissing, "")
		e.Data.Capability = executor.CapabilityProcess
		e.Data.Detail = "a machine-scoped executor must declare the process or agent capability"
		return &executor.CloseAfterReply{Err: e, Code: executor.CloseRegistrationRefused, Reason: "runtime registration refused"}
	}
	if h.opts.AllowRegistration != nil {
		err := h.opts.AllowRegistration(ctx, Registration{
			EnvironmentID: c.principal.EnvironmentID, MachineID: c.principal.MachineID,
			Executor: p.Executor, Capabilities: p.Capabilities, MaxSessions: p.MaxSessions, Local: c.local,
		})
		if err != nil {
			h.logger.Info("executor registration refused", "executor", p.Executor.Name, "err", err)
			h.goClose(c, executor.CloseRegistrationRefused, "runtime registration refused")
			return executor.NewRPCError(executor.CodeForbidden, "").WithDetail("runtime registration refused")
		}
	}
	if p.MaxSessions <= 0 {
		p.MaxSessions = 1
	}
	return nil
}

// resumeLocked moves the leases a registering executor reports onto its
// connection (res.Resumed), reports the ones it cannot keep (res.Lost), and
// ends the leases of its identity it no longer reports. It returns the
// resumed leases, whose pending calls are sent again once h.mu is released.
// h.mu must be held.
func (c *hubConn) resumeLocked(sessions []executor.SessionLease, res *executor.RegisterResult) []*Lease {
	h := c.h
	var resend []*Lease
	listed := make(map[string]bool)
	now := h.opts.Now()
	for _, s := range sessions {
		listed[s.SessionID] = true
		l := h.leases[s.SessionID]
		switch {
		case l == nil || l.LeaseID != s.LeaseID:
			res.Lost = append(res.Lost, executor.LostSession{SessionID: s.SessionID, Reason: "unknown_lease"})
		case l.identity != c.identity || l.state != leaseActive:
			res.Lost = append(res.Lost, executor.LostSession{SessionID: s.SessionID, Reason: "reassigned"})
		case !now.Before(l.expiresAt):
			res.Lost = append(res.Lost, executor.LostSession{SessionID: s.SessionID, Reason: executor.ReleaseLeaseExpired})
		default:
			if l.conn != nil && l.conn != c {
				delete(l.conn.leases, l.SessionID)
			}
			l.conn = c
			c.leases[l.SessionID] = l
			res.Resumed = append(res.Resumed, l.SessionID)
			resend = append(resend, l)
		}
	}
	// A restarted executor that no longer reports a session has lost it.
	for _, l := range h.leases {
		if l.identity == c.identity && !listed[l.SessionID] {
			h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the executor restarted without the session", ErrToolOutcomeUnknown), "")
		}
	}
	return resend
}

func (h *Hub) unregisterLocked(c *hubConn) {
	if h.byIdentity[c.identity] == c {
		delete(h.byIdentity, c.identity)
	}
	if m := h.byScope[c.principal.scope()]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(h.byScope, c.principal.scope())
		}
	}
	for _, l := range c.leases {
		if l.conn == c {
			l.conn = nil
		}
	}
	c.leases = make(map[string]*Lease)
	c.loseTurnsLocked()
	c.registered = false
	h.broadcastLocked(anyScope)
}

// detach handles the end of a connection.
func (h *Hub) detach(c *hubConn, err error) {
	code := executor.CloseCode(err)
	h.mu.Lock()
	delete(h.conns, c)
	wasRegistered := c.registered
	leases := make([]*Lease, 0, len(c.leases))
	for _, l := range c.leases {
		leases = append(leases, l)
	}
	if wasRegistered {
		h.unregisterLocked(c)
	}
	// An executor that closed normally stopped for good, and one that went
	// silent cannot be told anything: their sessions are lost now rather
	// than at lease expiry.
	switch {
	case code == int(websocket.StatusNormalClosure) || code == int(websocket.StatusGoingAway):
		for _, l := range leases {
			h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the executor closed", ErrToolOutcomeUnknown), "")
		}
	case errors.Is(err, executor.ErrSilent):
		for _, l := range leases {
			h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the executor went silent (%w)", ErrToolOutcomeUnknown, err), "")
		}
	}
	h.broadcastLocked(c.principal.scope())
	h.mu.Unlock()
	h.logger.Info("executor disconnected", "executor", c.info.Name, "close_code", code, "err", err)
}

func (c *hubConn) heartbeat(params json.RawMessage) (any, error) {
	var p executor.HeartbeatParams
	if err := executor.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	h := c.h
	res := executor.HeartbeatResult{Renewed: []executor.RenewedLease{}, Lost: []executor.LostSession{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.opts.Now()
	for _, s := range p.Sessions {
		l := c.leases[s.SessionID]
		if l != nil && l.LeaseID == s.LeaseID && l.state == leaseAssigning {
			// The executor accepted the assignment and the heartbeat
			// overtook its answer: the lease is about to start, not lost.
			continue
		}
		if l == nil || l.LeaseID != s.LeaseID || l.state != leaseActive || !now.Before(l.expiresAt) {
			res.Lost = append(res.Lost, executor.LostSession{SessionID: s.SessionID, Reason: executor.ReleaseLeaseExpired})
			continue
		}
		l.renewLocked(now)
		res.Renewed = append(res.Renewed, executor.RenewedLease{SessionID: l.SessionID, LeaseExpiresAt: l.expiresAt})
	}
	return res, nil
}

func (c *hubConn) toolResult(params json.RawMessage) (any, error) {
	var p executor.ToolResultParams
	if err := executor.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.ToolCallID == "" || p.SessionID == "" {
		return nil, executor.NewRPCError(executor.CodeInvalidParams, "").WithDetail("session_id and tool_call_id are required")
	}
	h := c.h
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.leases[p.SessionID]
	if l == nil {
		if id, ok := h.expired.get(p.SessionID); ok {
			return nil, executor.NewRPCError(executor.CodeLeaseExpired, "").WithDetail(fmt.Sprintf("lease %s of session %s expired before the result arrived", id, p.SessionID))
		}
		return nil, executor.NewRPCError(executor.CodeSessionNotActive, "").WithDetail("the session is not active")
	}
	if l.identity != c.identity {
		return nil, executor.NewRPCError(executor.CodeForbidden, "").WithDetail("the session is held by another executor")
	}
	return executor.ToolResultAck{Duplicate: !l.acceptResultLocked(p.ToolCallID, p.ToolResult)}, nil
}
