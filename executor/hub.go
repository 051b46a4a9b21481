package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Credentials checks the long-lived credentials that executors exchange for
// executor tokens. The store implements it. It only ever sees hashes made
// with [HashSecret], so the store keeps no plaintext secret.
//
// A credential that is unknown, revoked or archived is an error wrapping
// [ErrCredentialRejected] (the token endpoint answers 401); any other error
// is answered 503 and the executor retries.
type Credentials interface {
	// VerifyEnvironmentKey returns the environment of the environment key
	// whose hash is keyHash.
	VerifyEnvironmentKey(ctx context.Context, keyHash string) (environmentID string, err error)
	// VerifyMachineToken returns the machine of the machine token whose
	// hash is tokenHash.
	VerifyMachineToken(ctx context.Context, tokenHash string) (machineID string, err error)
}

// Registration describes an executor that asks to register.
type Registration struct {
	// EnvironmentID is set for an environment-scoped executor.
	EnvironmentID string
	// MachineID is set for a machine-scoped executor.
	MachineID    string
	Executor     ExecutorInfo
	Capabilities []string
	MaxSessions  int
}

// Notification is a notification an executor sent about one of its
// sessions: process.exit, terminal.output or terminal.exit.
type Notification struct {
	EnvironmentID string
	SessionID     string
	Method        string
	Params        json.RawMessage
}

// HubOptions configure a [Hub]. Only Credentials is required.
type HubOptions struct {
	// Credentials checks environment keys and machine tokens.
	Credentials Credentials
	// TokenSecret signs executor tokens; hubs that share it accept each
	// other's tokens. Empty means a random secret of this hub.
	TokenSecret []byte
	// TokenTTL is the lifetime of an executor token (default 15 minutes).
	// When it passes, the connection is closed with 4001.
	TokenTTL time.Duration
	// HeartbeatInterval is the heartbeat interval executors are told to
	// use (default 10 s).
	HeartbeatInterval time.Duration
	// LeaseTTL is how long a lease lasts without a heartbeat (default 30 s).
	LeaseTTL time.Duration
	// MaxFrameBytes limits one JSON-RPC frame (default 16 MiB).
	MaxFrameBytes int64
	// RequestTimeout bounds requests to executors (default 30 s).
	RequestTimeout time.Duration
	// PublicURL is the base URL (http or https) executors connect to,
	// returned by the token endpoint. Empty means the request's host.
	PublicURL string
	// AllowRegistration, if set, may refuse a registration (for example
	// of an archived environment); the connection is then closed with
	// 4002.
	AllowRegistration func(ctx context.Context, r Registration) error
	// OnNotification, if set, receives process and terminal notifications.
	// It must not block.
	OnNotification func(n Notification)
	// Logger receives the hub's diagnostics (default: discarded).
	Logger *slog.Logger
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Hub is the harness end of the executor protocol. It is an
// [http.Handler] serving the token endpoint (POST …/v1/executor/tokens)
// and the connect endpoint (GET …/v1/executor/connect); it places sessions
// on registered executors under leases and dispatches their tool calls.
type Hub struct {
	opts   HubOptions
	signer tokenSigner
	logger *slog.Logger

	mu         sync.Mutex
	byIdentity map[string]*hubConn          // registered connections
	byScope    map[string]map[*hubConn]bool // registered connections by scope (environment or machine)
	leases     map[string]*Lease            // active leases by session id
	changed    map[string]chan struct{}     // per environment: closed on change
	conns      map[*hubConn]bool            // every open connection
	draining   bool

	wg    sync.WaitGroup // connection handlers
	local struct {
		once sync.Once
		ln   *memListener
		srv  *http.Server
		done chan struct{}
	}
}

// NewHub returns a hub.
func NewHub(opts HubOptions) *Hub {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = 15 * time.Minute
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 10 * time.Second
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	secret := opts.TokenSecret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	return &Hub{
		opts:       opts,
		signer:     tokenSigner{secret: secret},
		logger:     opts.Logger,
		byIdentity: make(map[string]*hubConn),
		byScope:    make(map[string]map[*hubConn]bool),
		leases:     make(map[string]*Lease),
		changed:    make(map[string]chan struct{}),
		conns:      make(map[*hubConn]bool),
	}
}

// ServeHTTP routes POST …/executor/tokens to the token endpoint and
// GET …/executor/connect to the connect endpoint.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/executor/tokens"):
		h.serveToken(w, r)
	case strings.HasSuffix(r.URL.Path, "/executor/connect"):
		h.serveConnect(w, r)
	default:
		httpError(w, http.StatusNotFound, "not_found_error", "no such endpoint")
	}
}

// TokenHandler returns the handler of POST /v1/executor/tokens.
func (h *Hub) TokenHandler() http.Handler { return http.HandlerFunc(h.serveToken) }

// ConnectHandler returns the handler of GET /v1/executor/connect.
func (h *Hub) ConnectHandler() http.Handler { return http.HandlerFunc(h.serveConnect) }

func httpError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

func bearer(r *http.Request) string {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}

// tokenResponse is the body of a successful token request.
type tokenResponse struct {
	Type      string    `json:"type"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	URL       string    `json:"url"`
}

func (h *Hub) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "invalid_request_error", "use POST")
		return
	}
	secret := bearer(r)
	var p principal
	var err error
	switch {
	case h.opts.Credentials == nil:
		err = fmt.Errorf("%w: no credentials configured", ErrCredentialRejected)
	case strings.HasPrefix(secret, EnvironmentKeyPrefix):
		p.EnvironmentID, err = h.opts.Credentials.VerifyEnvironmentKey(r.Context(), HashSecret(secret))
	case strings.HasPrefix(secret, MachineTokenPrefix):
		p.MachineID, err = h.opts.Credentials.VerifyMachineToken(r.Context(), HashSecret(secret))
	default:
		err = ErrCredentialRejected
	}
	if err == nil && p.EnvironmentID == "" && p.MachineID == "" {
		err = ErrCredentialRejected
	}
	switch {
	case errors.Is(err, ErrCredentialRejected):
		httpError(w, http.StatusUnauthorized, "authentication_error", "invalid, revoked or archived executor credential")
		return
	case err != nil:
		h.logger.Warn("executor credential check failed", "err", err)
		httpError(w, http.StatusServiceUnavailable, "overloaded_error", "credential check unavailable; retry")
		return
	}
	expires := h.opts.Now().Add(h.opts.TokenTTL)
	base := h.opts.PublicURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(tokenResponse{
		Type:      "executor_token",
		Token:     h.signer.issue(p, expires),
		ExpiresAt: expires.UTC(),
		URL:       connectURL(base),
	})
}

// connectURL turns a base http(s) URL into the WebSocket connect URL.
func connectURL(base string) string {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/v1/executor/connect")
	switch {
	case strings.HasPrefix(base, "https://"):
		base = "wss://" + strings.TrimPrefix(base, "https://")
	case strings.HasPrefix(base, "http://"):
		base = "ws://" + strings.TrimPrefix(base, "http://")
	}
	return base + "/v1/executor/connect"
}

func (h *Hub) serveConnect(w http.ResponseWriter, r *http.Request) {
	claims, err := h.signer.verify(bearer(r), h.opts.Now())
	if err != nil {
		httpError(w, http.StatusUnauthorized, "authentication_error", err.Error())
		return
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		httpError(w, http.StatusServiceUnavailable, "overloaded_error", "the hub is shutting down")
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c := &hubConn{h: h, principal: claims.principal, leases: make(map[string]*Lease)}
	c.rpc = newRPCConn(ws, connConfig{
		handler:        c.handle,
		inline:         func(m string) bool { return m == MethodToolResult || m == MethodHeartbeat },
		maxFrame:       h.opts.MaxFrameBytes,
		requestTimeout: h.opts.RequestTimeout,
		logger:         h.logger,
	})
	if ws.Subprotocol() != Subprotocol {
		c.rpc.closeWith(CloseUnsupportedProtocol, "unsupported protocol")
		return
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		c.rpc.closeWith(CloseDrained, "drained")
		return
	}
	h.conns[c] = true
	h.mu.Unlock()
	expiry := time.AfterFunc(time.Unix(claims.Expires, 0).Sub(h.opts.Now()), func() {
		c.close(CloseTokenExpired, "token expired")
	})
	err = c.rpc.serve(context.WithoutCancel(r.Context()))
	expiry.Stop()
	h.detach(c, err)
}

// hubConn is the harness side of one executor connection.
type hubConn struct {
	h         *Hub
	rpc       *rpcConn
	principal principal

	// guarded by h.mu
	registered  bool
	id          string
	identity    string
	info        ExecutorInfo
	caps        []string
	maxSessions int
	leases      map[string]*Lease
}

func (c *hubConn) has(capability string) bool { return slices.Contains(c.caps, capability) }

// close tells the executor why and closes the connection with code.
func (c *hubConn) close(code int, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.rpc.notify(ctx, MethodClose, closeParams{Code: code, Reason: reason})
	c.rpc.closeWith(code, reason)
}

// goClose closes c in a goroutine owned by the hub (Shutdown waits for it).
// It is called while a connection handler runs, so the wait group is
// already positive.
func (h *Hub) goClose(c *hubConn, code int, reason string) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		c.close(code, reason)
	}()
}

func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return NewRPCError(CodeInvalidParams, "").withDetail("params are required")
	}
	if err := json.Unmarshal(params, v); err != nil {
		return NewRPCError(CodeInvalidParams, "").withDetail(err.Error())
	}
	return nil
}

func (c *hubConn) handle(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == MethodRegister {
		return c.register(ctx, params)
	}
	c.h.mu.Lock()
	registered := c.registered
	c.h.mu.Unlock()
	if !registered {
		switch method {
		case MethodHeartbeat, MethodToolResult, MethodProcessExit, MethodTerminalOutput, MethodTerminalExit:
			return nil, NewRPCError(CodeUnauthorized, "").withDetail("executor.register first")
		}
		return nil, errMethodNotFound
	}
	switch method {
	case MethodHeartbeat:
		return c.heartbeat(params)
	case MethodToolResult:
		return c.toolResult(params)
	case MethodProcessExit, MethodTerminalOutput, MethodTerminalExit:
		var ref struct {
			SessionID string `json:"session_id"`
		}
		if err := decodeParams(params, &ref); err != nil {
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
	var p registerParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.Protocol != Subprotocol {
		return nil, &closeAfterReply{
			err:  NewRPCError(CodeUnsupportedProtocol, "").withDetail(fmt.Sprintf("protocol %q is not spoken; use %q", p.Protocol, Subprotocol)),
			code: CloseUnsupportedProtocol, reason: "unsupported protocol",
		}
	}
	if p.Executor.Name == "" {
		return nil, NewRPCError(CodeInvalidParams, "").withDetail("executor.name is required")
	}
	if c.principal.MachineID != "" && !slices.Contains(p.Capabilities, CapabilityProcess) && !slices.Contains(p.Capabilities, CapabilityAgent) {
		e := WithReason(CodeCapabilityUnavailable, ReasonCapabilityMissing, "")
		e.Data.Capability = CapabilityProcess
		e.Data.Detail = "a machine-scoped executor must declare the process or agent capability"
		return nil, &closeAfterReply{err: e, code: CloseRegistrationRefused, reason: "runtime registration refused"}
	}
	if h.opts.AllowRegistration != nil {
		err := h.opts.AllowRegistration(ctx, Registration{
			EnvironmentID: c.principal.EnvironmentID, MachineID: c.principal.MachineID,
			Executor: p.Executor, Capabilities: p.Capabilities, MaxSessions: p.MaxSessions,
		})
		if err != nil {
			h.logger.Info("executor registration refused", "executor", p.Executor.Name, "err", err)
			h.goClose(c, CloseRegistrationRefused, "runtime registration refused")
			return nil, NewRPCError(CodeForbidden, "").withDetail("runtime registration refused")
		}
	}
	if p.MaxSessions <= 0 {
		p.MaxSessions = 1
	}
	identity := c.principal.scope() + "/" + p.Executor.Name
	res := registerResult{
		HeartbeatIntervalMS: h.opts.HeartbeatInterval.Milliseconds(),
		LeaseTTLMS:          h.opts.LeaseTTL.Milliseconds(),
		Resumed:             []string{},
		Lost:                []LostSession{},
	}
	var resend []*Lease
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		h.goClose(c, CloseDrained, "drained")
		return nil, NewRPCError(CodeResourceUnavailable, "").withDetail("the hub is shutting down")
	}
	if c.registered {
		h.mu.Unlock()
		return nil, NewRPCError(CodeConflict, "").withDetail("already registered")
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
	c.maxSessions = p.MaxSessions
	h.byIdentity[identity] = c
	scope := c.principal.scope()
	if h.byScope[scope] == nil {
		h.byScope[scope] = make(map[*hubConn]bool)
	}
	h.byScope[scope][c] = true
	listed := make(map[string]bool)
	now := h.opts.Now()
	for _, s := range p.Sessions {
		listed[s.SessionID] = true
		l := h.leases[s.SessionID]
		switch {
		case l == nil || l.LeaseID != s.LeaseID:
			res.Lost = append(res.Lost, LostSession{SessionID: s.SessionID, Reason: "unknown_lease"})
		case l.identity != identity || l.state != leaseActive:
			res.Lost = append(res.Lost, LostSession{SessionID: s.SessionID, Reason: "reassigned"})
		case !now.Before(l.expiresAt):
			res.Lost = append(res.Lost, LostSession{SessionID: s.SessionID, Reason: ReleaseLeaseExpired})
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
		if l.identity == identity && !listed[l.SessionID] {
			h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the executor restarted without the session", ErrToolOutcomeUnknown), "")
		}
	}
	res.ExecutorID = c.id
	h.broadcastLocked(c.principal.scope())
	h.mu.Unlock()
	if old != nil {
		h.goClose(old, CloseReplaced, "replaced")
	}
	h.logger.Info("executor registered", "executor", p.Executor.Name, "scope", c.principal.scope(), "capabilities", p.Capabilities, "resumed", len(res.Resumed))
	for _, l := range resend {
		l.resendPending(c)
	}
	return res, nil
}

// unregisterLocked removes c from the placement indexes; its leases stay
// until they are resumed or expire.
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
	c.registered = false
}

// detach handles the end of a connection.
func (h *Hub) detach(c *hubConn, err error) {
	code := CloseCode(err)
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
	// An executor that closed normally stopped for good: its sessions are
	// lost now rather than at lease expiry.
	if code == int(websocket.StatusNormalClosure) || code == int(websocket.StatusGoingAway) {
		for _, l := range leases {
			h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the executor closed", ErrToolOutcomeUnknown), "")
		}
	}
	h.broadcastLocked(c.principal.scope())
	h.mu.Unlock()
	h.logger.Info("executor disconnected", "executor", c.info.Name, "close_code", code, "err", err)
}

func (c *hubConn) heartbeat(params json.RawMessage) (any, error) {
	var p heartbeatParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	h := c.h
	res := heartbeatResult{Renewed: []renewedLease{}, Lost: []LostSession{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.opts.Now()
	for _, s := range p.Sessions {
		l := c.leases[s.SessionID]
		if l == nil || l.LeaseID != s.LeaseID || l.state != leaseActive || !now.Before(l.expiresAt) {
			res.Lost = append(res.Lost, LostSession{SessionID: s.SessionID, Reason: ReleaseLeaseExpired})
			continue
		}
		l.renewLocked(now)
		res.Renewed = append(res.Renewed, renewedLease{SessionID: l.SessionID, LeaseExpiresAt: l.expiresAt})
	}
	return res, nil
}

func (c *hubConn) toolResult(params json.RawMessage) (any, error) {
	var p toolResultParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.ToolCallID == "" || p.SessionID == "" {
		return nil, NewRPCError(CodeInvalidParams, "").withDetail("session_id and tool_call_id are required")
	}
	h := c.h
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.leases[p.SessionID]
	if l == nil {
		return nil, NewRPCError(CodeSessionNotActive, "").withDetail("the session is not active")
	}
	if l.identity != c.identity {
		return nil, NewRPCError(CodeForbidden, "").withDetail("the session is held by another executor")
	}
	if _, ok := l.results[p.ToolCallID]; ok {
		return toolResultAck{Duplicate: true}, nil
	}
	if p.Content == nil {
		p.Content = []ContentBlock{}
	}
	l.keepResultLocked(p.ToolCallID, p.ToolResult)
	if tc := l.calls[p.ToolCallID]; tc != nil {
		delete(l.calls, p.ToolCallID)
		tc.result = p.ToolResult
		close(tc.done)
	}
	return toolResultAck{}, nil
}

// Changed returns a channel that is closed at the next change of the
// executors of an environment: a registration, a disconnection or a freed
// session slot. A harness whose [Hub.Assign] failed with [ErrNoExecutor]
// waits on it (taken before the Assign call) and tries again.
func (h *Hub) Changed(environmentID string) <-chan struct{} {
	return h.changedFor(principal{EnvironmentID: environmentID}.scope())
}

// ChangedMachine is [Hub.Changed] for the executors of a machine.
func (h *Hub) ChangedMachine(machineID string) <-chan struct{} {
	return h.changedFor(principal{MachineID: machineID}.scope())
}

func (h *Hub) changedFor(scope string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.changed[scope]
	if ch == nil {
		ch = make(chan struct{})
		h.changed[scope] = ch
	}
	return ch
}

func (h *Hub) broadcastLocked(scope string) {
	if ch := h.changed[scope]; ch != nil {
		close(ch)
		delete(h.changed, scope)
	}
}

// ExecutorStatus describes a registered executor.
type ExecutorStatus struct {
	ID            string
	EnvironmentID string
	MachineID     string
	Executor      ExecutorInfo
	Capabilities  []string
	MaxSessions   int
	Sessions      int
}

// Executors lists the registered executors.
func (h *Hub) Executors() []ExecutorStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ExecutorStatus
	for _, c := range h.byIdentity {
		out = append(out, ExecutorStatus{
			ID: c.id, EnvironmentID: c.principal.EnvironmentID, MachineID: c.principal.MachineID,
			Executor: c.info, Capabilities: slices.Clone(c.caps), MaxSessions: c.maxSessions, Sessions: len(c.leases),
		})
	}
	slices.SortFunc(out, func(a, b ExecutorStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Shutdown drains the hub: every executor connection is closed with 4005
// (executors reconnect to another node), every lease ends (pending tool
// calls end with [ErrToolOutcomeUnknown]) and Shutdown waits for the
// connection handlers to return or ctx to end.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	conns := make([]*hubConn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	for _, l := range h.leases {
		h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the hub shut down", ErrToolOutcomeUnknown), "")
	}
	for scope := range h.changed {
		h.broadcastLocked(scope)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.close(CloseDrained, "drained") })
	}
	wg.Wait()
	h.mu.Lock()
	srv, srvDone := h.local.srv, h.local.done
	h.mu.Unlock()
	if srv != nil {
		srv.Close()
		<-srvDone
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
