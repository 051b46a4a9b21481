package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// DefaultMaxRefusedRegistrations is how many refused registrations in a row
// end a client with [ErrRegistrationRefused].
const DefaultMaxRefusedRegistrations = 3

// ConfirmRequest asks a person on the executor's machine to allow a call.
type ConfirmRequest struct {
	SessionID  string
	ToolCallID string
	Tool       string
	Input      []byte
}

// EventType says what an [Event] reports.
type EventType int

// Client events.
const (
	EventConnecting   EventType = iota // dialing (Attempt, Err of the last failure)
	EventRegistered                    // registered; serving
	EventDisconnected                  // the connection ended (Err)
	EventToolStarted                   // a tool call started (SessionID, ToolCallID, Tool)
	EventToolFinished                  // a tool call finished (… and Result)
	EventSessionAssigned
	EventSessionReleased
	// EventTurnStarted: an agent end accepted a turn.start (SessionID;
	// Delta when its transcript came as a delta the client rebuilt).
	EventTurnStarted
	// EventTranscriptUnavailable: an agent end refused a turn.start
	// whose transcript delta continues a transcript it no longer holds
	// (SessionID); the harness sends it again whole.
	EventTranscriptUnavailable
)

// Event reports a change of the client's state, for display.
type Event struct {
	Type       EventType
	Attempt    int
	Err        error
	SessionID  string
	ToolCallID string
	Tool       string
	Result     *ToolResult
	Delta      bool
}

// Options configure a [Client]. URL and a credential (EnvironmentKey,
// MachineToken or TokenSource) are required; every other zero value is a
// useful default.
type Options struct {
	// URL is the base URL of the reins server ("https://reins.example.com").
	URL string
	// EnvironmentKey or MachineToken is the executor's credential.
	EnvironmentKey string
	MachineToken   string
	// TokenSource, if set, replaces the token endpoint.
	TokenSource TokenSource
	// HTTPClient is used for the token endpoint and the WebSocket dial.
	HTTPClient *http.Client
	// Executor describes the executor; the zero value is filled from the
	// host (name = hostname).
	Executor ExecutorInfo
	// Capabilities declared at registration (default
	// [BuiltinCapabilities] when Sessions is the built-in toolset).
	Capabilities []string
	// MaxSessions is how many sessions the executor runs at once (default 1).
	MaxSessions int
	// MaxConcurrentCalls bounds the tool calls running at once (default
	// 16 per session); beyond it tool.call is answered -32009.
	MaxConcurrentCalls int
	// MaxReconnectAttempts ends the client with [ErrReconnectExhausted]
	// after that many failed reconnects in a row; 0 means unlimited.
	MaxReconnectAttempts int
	// MaxRefusedRegistrations (default 3) refusals in a row end the client
	// with [ErrRegistrationRefused].
	MaxRefusedRegistrations int
	// BackoffMin and BackoffMax bound the reconnect backoff (defaults
	// 0.5 s and 30 s), exponential with full jitter.
	BackoffMin, BackoffMax time.Duration
	// Sessions opens assigned sessions (default: the built-in toolset in
	// subdirectories of Workspace, each session's processes in a sandbox
	// of its own; &BuiltinSessions{Dir: …, Unconfined: true} runs them on
	// this host instead).
	Sessions SessionOpener
	// Workspace is the directory of the built-in toolset's sessions.
	Workspace string
	// Confirm, if set, is asked before each mutating call of the built-in
	// tools (bash, write, edit): false is answered
	// "local_confirmation_denied", no answer within ConfirmTimeout
	// "local_confirmation_expired".
	Confirm        func(ctx context.Context, req ConfirmRequest) (bool, error)
	ConfirmTimeout time.Duration
	// Mutating reports which tools need confirmation (default: bash,
	// write, edit).
	Mutating func(tool string) bool
	// RequestTimeout bounds requests to the harness (default 30 s).
	RequestTimeout time.Duration
	// PingInterval is how often the client pings the harness (default
	// 10 s; negative: never), PingTimeout how long a pong may take
	// (default 5 s): a connection whose pong is late went silent, and the
	// client connects again. (Over an unbuffered transport such as
	// net.Pipe, pings crossing each other would block both readers: only
	// one end may ping there; the hub pings every remote executor.)
	PingInterval, PingTimeout time.Duration
	// MaxFrameBytes limits one JSON-RPC frame (default 16 MiB).
	MaxFrameBytes int64
	// Agent runs the turns the harness gives this executor (declare
	// [CapabilityAgent] too). Nil: turn.start is refused with -32012.
	Agent AgentHandler
	// AcceptTurn, if set, is asked before a turn.start is acknowledged
	// (with its whole transcript); an error refuses the turn. An *RPCError
	// keeps its code and data on the wire: data.reason is the
	// session.error type the harness records and data.retryable whether
	// it starts the turn again (with its retry policy), as
	// [MCPUnavailable] does for an MCP server the turn needs. Any other
	// error is -32603 internal_error, recorded as unknown_error and not
	// retried.
	AcceptTurn func(ctx context.Context, start *TurnStart) error
	// TranscriptCache is how many sessions' transcripts an agent end
	// keeps (least recently used first out; default 1000) so that the
	// harness may send only what a session's log gained since the
	// previous turn (the "transcript_deltas" feature); the handler still
	// sees the whole transcript. Negative: keep none, and take the whole
	// transcript in every turn.start.
	TranscriptCache int
	// OnEvent, if set, receives state changes. It must not block.
	OnEvent func(Event)
	// Logger receives diagnostics (default: discarded).
	Logger *slog.Logger
}

// Client is the executor end of the protocol. Run connects, registers and
// serves until a terminal error; Call sends requests to the harness.
type Client struct {
	opts     Options
	tokens   TokenSource
	protocol string // sent in executor.register; a field so tests can vary it
	logger   *slog.Logger
	own      *BuiltinSessions // the default sessions, closed when Run ends

	mu   sync.Mutex // guards the fields below, up to turns
	conn *Conn      // the registered connection, or nil
	// registering, while a connection's registration is in flight, is
	// closed when it ends: Call waits for it.
	registering chan struct{}
	sessions    map[string]*clientSession
	outbox      map[string]*outboxEntry // results not yet acknowledged, by tool_call_id
	inAck       bool                    // the harness of conn accepts results in tool.call acks
	unproven    int                     // outbox entries sent in an ack on conn, awaiting a heartbeat
	running     int
	token       *Token
	stopped     bool
	err         error
	kick        chan struct{} // wakes the result sender
	prove       chan struct{} // asks for an early heartbeat (too many unproven results)

	turns agentTurns  // agent-end turns running
	held  transcripts // sessions' transcripts (transcript_deltas)

	stopCh chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // tool calls and session closes
}

// NewClient returns a client; call Run to start it.
func NewClient(opts Options) *Client {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Executor.Name == "" {
		opts.Executor.Name, _ = os.Hostname()
	}
	if opts.Executor.Hostname == "" {
		opts.Executor.Hostname, _ = os.Hostname()
	}
	if opts.Executor.OS == "" {
		opts.Executor.OS = runtime.GOOS
	}
	if opts.Executor.Arch == "" {
		opts.Executor.Arch = runtime.GOARCH
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 1
	}
	if opts.MaxConcurrentCalls <= 0 {
		opts.MaxConcurrentCalls = 16 * opts.MaxSessions
	}
	if opts.MaxRefusedRegistrations <= 0 {
		opts.MaxRefusedRegistrations = DefaultMaxRefusedRegistrations
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = DefaultBackoffMin
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	if opts.ConfirmTimeout <= 0 {
		opts.ConfirmTimeout = time.Minute
	}
	var own *BuiltinSessions
	opts.PingInterval, opts.PingTimeout = pingSettings(opts.PingInterval, opts.PingTimeout)
	if opts.Sessions == nil {
		own = &BuiltinSessions{Dir: opts.Workspace, Logger: opts.Logger}
		opts.Sessions = own
		if opts.Capabilities == nil {
			opts.Capabilities = BuiltinCapabilities()
		}
	}
	if b, ok := opts.Sessions.(*BuiltinSessions); ok && b.ServerURL == "" {
		b.ServerURL, b.HTTPClient = opts.URL, opts.HTTPClient
	}
	if opts.TranscriptCache == 0 {
		opts.TranscriptCache = DefaultTranscriptCache
	}
	if opts.Mutating == nil {
		opts.Mutating = func(t string) bool { return t == "bash" || t == "write" || t == "edit" }
	}
	c := &Client{
		opts:     opts,
		own:      own,
		held:     transcripts{max: opts.TranscriptCache},
		protocol: Subprotocol,
		tokens:   opts.TokenSource,
		logger:   opts.Logger,
		sessions: make(map[string]*clientSession),
		outbox:   make(map[string]*outboxEntry),
		kick:     make(chan struct{}, 1),
		prove:    make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
	}
	if c.tokens == nil {
		cred := opts.EnvironmentKey
		if cred == "" {
			cred = opts.MachineToken
		}
		c.tokens = &TokenEndpoint{URL: opts.URL, Credential: cred, Executor: opts.Executor, HTTPClient: opts.HTTPClient}
	}
	return c
}

// Err returns why the client ended, or nil while it runs.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when Run has returned.
func (c *Client) Done() <-chan struct{} { return c.done }

// Stop stops the client: the connection is closed normally (the harness
// treats the executor's sessions as lost), sessions are closed and Run
// returns [ErrClientStopped]. Stop does not wait; see Done.
func (c *Client) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.stopped = true
		close(c.stopCh)
	}
}

// Call sends a request to the harness over the registered connection and
// decodes its result into result (unless nil). It fails with
// [ErrNotConnected] when the client is not registered and with
// [ErrClientStopped] after the client ended.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	conn, stopped, registering := c.conn, c.stopped || c.err != nil, c.registering
	c.mu.Unlock()
	if conn == nil && registering != nil && !stopped {
		// The harness sends its first requests right after its answer
		// to the registration: a handler of one may call before the
		// client has recorded the connection.
		select {
		case <-registering:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
		conn = c.conn
		c.mu.Unlock()
	}
	if stopped {
		return ErrClientStopped
	}
	if conn == nil {
		return ErrNotConnected
	}
	return conn.Call(ctx, method, params, result)
}

func (c *Client) emit(e Event) {
	if c.opts.OnEvent != nil {
		c.opts.OnEvent(e)
	}
}

// Run connects and serves until a terminal error, Stop or the end of ctx,
// and returns that error (also reported by Err afterwards): [ErrReplaced],
// [ErrReconnectExhausted], [ErrCredentialRejected],
// [ErrRegistrationRefused], [ErrSandboxUnavailable] (before connecting:
// the built-in toolset cannot sandbox its processes here, see
// [BuiltinSessions]) or [ErrClientStopped] (after Stop, ctx's end or the
// terminal close code 4003). Run may be called once.
func (c *Client) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // owned by Run: ends with ctx
		select {
		case <-c.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := c.prepare(ctx)
	if err == nil {
		err = c.loop(ctx)
	}
	c.mu.Lock()
	c.err = err
	c.stopped = true
	sessions := c.sessions
	c.sessions = make(map[string]*clientSession)
	c.mu.Unlock()
	for _, s := range sessions {
		s.close()
	}
	c.wg.Wait()
	if c.own != nil {
		c.own.Close()
	}
	close(c.done)
	return err
}

// A preparer is a [SessionOpener] with work to do before the executor
// registers: [BuiltinSessions] makes its sandboxes.
type preparer interface {
	Prepare(ctx context.Context) error
}

// prepare readies the session opener of an executor that serves tools, so
// that one whose tools cannot run as configured ends before it registers.
func (c *Client) prepare(ctx context.Context) error {
	p, ok := c.opts.Sessions.(preparer)
	if !ok || !slices.ContainsFunc(c.opts.Capabilities, servesTools) {
		return nil
	}
	return p.Prepare(ctx)
}

// servesTools reports whether capability is one of running tools.
func servesTools(capability string) bool {
	return capability == CapabilityProcess || capability == CapabilityProcessPTY || strings.HasPrefix(capability, "tool:")
}

func (c *Client) loop(ctx context.Context) error {
	failures, refusals := 0, 0
	var last error
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrClientStopped, context.Cause(ctx))
		}
		c.emit(Event{Type: EventConnecting, Attempt: failures + 1, Err: last})
		registered, err := c.connectOnce(ctx)
		if registered {
			failures, refusals = 0, 0
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrClientStopped, context.Cause(ctx))
		}
		c.emit(Event{Type: EventDisconnected, Err: err})
		code := CloseCode(err)
		var re *RPCError
		switch {
		case errors.Is(err, ErrCredentialRejected):
			return err
		case code == CloseReplaced:
			return fmt.Errorf("%w: %w", ErrReplaced, err)
		case code == CloseUnsupportedProtocol || (errors.As(err, &re) && re.Code == CodeUnsupportedProtocol):
			return fmt.Errorf("%w: unsupported protocol: %w", ErrClientStopped, err)
		case code == CloseRegistrationRefused || (errors.As(err, &re) && re.Code == CodeCapabilityUnavailable):
			refusals++
			c.logger.Warn("executor registration refused", "refusals", refusals, "err", err)
			if refusals >= c.opts.MaxRefusedRegistrations {
				return fmt.Errorf("%w: %w", ErrRegistrationRefused, err)
			}
		case code == CloseTokenExpired:
			c.dropToken()
			if registered {
				last = err
				continue // refresh and reconnect at once
			}
		}
		last = err
		failures++
		if c.opts.MaxReconnectAttempts > 0 && failures > c.opts.MaxReconnectAttempts {
			return fmt.Errorf("%w after %d attempts: %w", ErrReconnectExhausted, failures, err)
		}
		d := reconnectDelay(failures, c.opts.BackoffMin, c.opts.BackoffMax)
		c.logger.Info("executor disconnected; reconnecting", "in", d, "attempt", failures, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

func (c *Client) dropToken() {
	c.mu.Lock()
	c.token = nil
	c.mu.Unlock()
}

func (c *Client) getToken(ctx context.Context) (Token, error) {
	c.mu.Lock()
	tok := c.token
	c.mu.Unlock()
	if tok != nil && (tok.ExpiresAt.IsZero() || time.Until(tok.ExpiresAt) > 30*time.Second) {
		return *tok, nil
	}
	t, err := c.tokens.Token(ctx)
	if err != nil {
		return Token{}, err
	}
	if t.URL == "" {
		t.URL = ConnectURL(c.opts.URL)
	}
	c.mu.Lock()
	c.token = &t
	c.mu.Unlock()
	return t, nil
}

// connectOnce gets a token, connects, registers and serves until the
// connection ends. registered reports whether registration succeeded.
func (c *Client) connectOnce(ctx context.Context) (registered bool, err error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return false, err
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	// The read loop outlives ctx so that stopping closes the connection
	// with a close frame (1000) rather than dropping it.
	sctx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	served := make(chan error, 1)
	go func() { served <- conn.Serve(sctx) }() // owned: awaited here or by serveRegistered

	res, err := c.registerOn(cctx, conn)
	if err != nil {
		conn.CloseWith(int(websocket.StatusNormalClosure), "registration failed")
		stopServe()
		<-served
		return false, err
	}
	c.emit(Event{Type: EventRegistered})
	c.logger.Info("executor registered", "executor_id", res.ExecutorID, "resumed", len(res.Resumed), "lost", len(res.Lost))
	return true, c.serveRegistered(ctx, cctx, stop, conn, served, res)
}

// dial gets a token and opens the executor connection with it; a token
// the server refuses (401) is dropped so that the next attempt gets
// another.
func (c *Client) dial(ctx context.Context) (*Conn, error) {
	tok, err := c.getToken(ctx)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ws, resp, err := websocket.Dial(dctx, tok.URL, &websocket.DialOptions{
		HTTPClient:   c.opts.HTTPClient,
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + tok.Token}},
		Subprotocols: []string{Subprotocol},
	})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			c.dropToken()
		}
		return nil, fmt.Errorf("executor: connect: %w", err)
	}
	conn := NewConn(ws, ConnConfig{
		Inline:         func(m string) bool { return m == MethodToolCall },
		SyncReply:      true,
		MaxFrame:       c.opts.MaxFrameBytes,
		RequestTimeout: c.opts.RequestTimeout,
		Logger:         c.logger,
	})
	conn.handler = func(hctx context.Context, method string, params json.RawMessage) (any, error) {
		return c.handle(hctx, conn, method, params)
	}
	return conn, nil
}

// registerOn registers on conn while calls made meanwhile wait for it
// (c.registering). A refusal may be followed by its close code, which is
// let arrive (up to 2 s) and joined to the error.
func (c *Client) registerOn(ctx context.Context, conn *Conn) (RegisterResult, error) {
	registering := make(chan struct{})
	c.mu.Lock()
	c.registering = registering
	c.mu.Unlock()
	res, err := c.register(ctx, conn)
	c.mu.Lock()
	c.registering = nil
	c.mu.Unlock()
	close(registering)
	var re *RPCError
	if err == nil || !errors.As(err, &re) {
		return res, err
	}
	t := time.NewTimer(2 * time.Second)
	select {
	case <-conn.done:
	case <-t.C:
	}
	t.Stop()
	if ce := conn.Err(); CloseCode(ce) != -1 {
		err = fmt.Errorf("%w (%w)", re, ce)
	}
	return res, err
}

// serveRegistered runs a registered connection's heartbeats, result
// sender and keep-alive until its read loop ends (served) or ctx does,
// which closes it normally; it returns why the connection ended.
func (c *Client) serveRegistered(ctx, cctx context.Context, stop context.CancelFunc, conn *Conn, served <-chan error, res RegisterResult) error {
	interval := time.Duration(res.HeartbeatIntervalMS) * time.Millisecond
	if interval <= 0 {
		interval = 10 * time.Second
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.heartbeats(cctx, conn, interval) })
	wg.Go(func() { c.sendResults(cctx, conn) })
	wg.Go(func() { conn.KeepAlive(c.opts.PingInterval, c.opts.PingTimeout) })
	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
		conn.CloseWith(int(websocket.StatusNormalClosure), "executor stopped")
		serveErr = <-served
	}
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
	}
	c.mu.Unlock()
	stop()
	wg.Wait()
	if ce := conn.Err(); ce != nil {
		serveErr = ce
	}
	return serveErr
}

// dropLostLocked ends the sessions the harness reported lost, of those
// held as sent: a session assigned again under a new lease while the
// report was on its way is the new lease's, and stays.
func (c *Client) dropLostLocked(lost []LostSession, held []SessionLease) {
	sent := make(map[string]string, len(held))
	for _, h := range held {
		sent[h.SessionID] = h.LeaseID
	}
	for _, l := range lost {
		s := c.sessions[l.SessionID]
		if s == nil || s.a.LeaseID != sent[l.SessionID] {
			continue
		}
		delete(c.sessions, l.SessionID)
		c.dropResultsLocked(l.SessionID)
		c.wg.Go(s.close)
	}
}

func (c *Client) register(ctx context.Context, conn *Conn) (RegisterResult, error) {
	c.mu.Lock()
	held := make([]SessionLease, 0, len(c.sessions))
	for _, s := range c.sessions {
		held = append(held, SessionLease{SessionID: s.a.SessionID, LeaseID: s.a.LeaseID})
	}
	c.mu.Unlock()
	var res RegisterResult
	err := conn.Call(ctx, MethodRegister, RegisterParams{
		Protocol:     c.protocol,
		Executor:     c.opts.Executor,
		Capabilities: c.opts.Capabilities,
		MaxSessions:  c.opts.MaxSessions,
		Sessions:     held,
		Features:     c.features(),
	}, &res)
	if err != nil {
		return res, err
	}
	c.mu.Lock()
	c.dropLostLocked(res.Lost, held)
	c.conn = conn
	c.inAck = slices.Contains(res.Features, FeatureResultInAck)
	c.unproven = 0
	c.mu.Unlock()
	c.wake()
	return res, nil
}

// outboxEntry is a tool result the harness has not acknowledged yet.
type outboxEntry struct {
	r ToolResultParams
	// ackConn is the connection whose tool.call acknowledgement carries
	// the result ([FeatureResultInAck]), nil if it goes as tool.result;
	// such a result is not sent again on that connection.
	ackConn *Conn
	// acked: that acknowledgement was written. The harness reads frames
	// in order, so the answer to a heartbeat sent after it proves it was
	// received.
	acked bool
}

// MaxUnprovenResults is how many results sent in acknowledgements
// (result_in_ack) may wait for their proof of receipt before a Client
// sends an early heartbeat.
const MaxUnprovenResults = 256

// Unacknowledged reports the tool results the client keeps because the
// harness has not yet proven it received them: kept in all, and inAck of
// them sent inside a tool.call acknowledgement (result_in_ack), which the
// answer to a later heartbeat proves.
func (c *Client) Unacknowledged() (kept, inAck int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.outbox {
		if e.acked {
			inAck++
		}
	}
	return len(c.outbox), inAck
}

func (c *Client) dropResultsLocked(sessionID string) {
	for id, e := range c.outbox {
		if e.r.SessionID == sessionID {
			c.dropLocked(id)
		}
	}
}

// dropLocked forgets an acknowledged result.
func (c *Client) dropLocked(id string) {
	if e := c.outbox[id]; e != nil && e.acked && e.ackConn == c.conn {
		c.unproven--
	}
	delete(c.outbox, id)
}

// ackedLocked records that e went out in the acknowledgement of its
// tool.call.
func (c *Client) ackedLocked(e *outboxEntry) {
	if c.outbox[e.r.ToolCallID] != e {
		return // acknowledged meanwhile
	}
	e.acked = true
	if e.ackConn != c.conn {
		return // that connection is gone: the result is sent again
	}
	c.unproven++
	if c.unproven >= MaxUnprovenResults {
		select {
		case c.prove <- struct{}{}:
		default:
		}
	}
}

// heartbeats renews the leases every interval and, when results sent in
// acknowledgements pile up, early: the answer proves the harness read them.
func (c *Client) heartbeats(ctx context.Context, conn *Conn, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-conn.done:
			return
		case <-t.C:
		case <-c.prove:
		}
		c.mu.Lock()
		held := make([]SessionLease, 0, len(c.sessions))
		for _, s := range c.sessions {
			held = append(held, SessionLease{SessionID: s.a.SessionID, LeaseID: s.a.LeaseID})
		}
		var sent []string // written before the heartbeat, so received if it is answered
		for id, e := range c.outbox {
			if e.acked && e.ackConn == conn {
				sent = append(sent, id)
			}
		}
		c.mu.Unlock()
		var res HeartbeatResult
		if err := conn.Call(ctx, MethodHeartbeat, HeartbeatParams{Sessions: held}, &res); err != nil {
			c.logger.Debug("heartbeat failed", "err", err)
			continue
		}
		c.mu.Lock()
		for _, id := range sent {
			if e := c.outbox[id]; e != nil && e.acked && e.ackConn == conn {
				c.dropLocked(id)
			}
		}
		c.dropLostLocked(res.Lost, held)
		c.mu.Unlock()
	}
}

func (c *Client) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// deliver sends one tool result and drops it from the outbox once the
// harness answered. It reports false when the connection failed (the
// result stays for a resend).
func (c *Client) deliver(ctx context.Context, conn *Conn, r ToolResultParams) bool {
	var ack ToolResultAck
	err := conn.Call(ctx, MethodToolResult, r, &ack)
	var re *RPCError
	if err != nil && !errors.As(err, &re) {
		return false
	}
	if re != nil {
		c.logger.Warn("tool result refused", "tool_call_id", r.ToolCallID, "err", re)
	}
	c.mu.Lock()
	c.dropLocked(r.ToolCallID)
	c.mu.Unlock()
	return true
}

// deliverAsync sends one tool result without waiting; the answer drops it
// from the outbox. If the connection ends first the result stays there and
// is sent again after re-registering.
func (c *Client) deliverAsync(conn *Conn, r ToolResultParams) {
	conn.CallAsync(context.Background(), MethodToolResult, r, func(_ json.RawMessage, err error) {
		var re *RPCError
		if err != nil && !errors.As(err, &re) {
			return
		}
		if re != nil {
			c.logger.Warn("tool result refused", "tool_call_id", r.ToolCallID, "err", re)
		}
		c.mu.Lock()
		c.dropLocked(r.ToolCallID)
		c.mu.Unlock()
	})
}

// sendResults sends every unacknowledged tool result over conn after
// registration (results of calls that finished while disconnected), and
// again whenever woken, until the connection ends.
func (c *Client) sendResults(ctx context.Context, conn *Conn) {
	for {
		c.mu.Lock()
		batch := make([]ToolResultParams, 0, len(c.outbox))
		for _, e := range c.outbox {
			if e.ackConn != conn {
				// Not sent, or sent in an acknowledgement on an earlier
				// connection that may not have been read.
				batch = append(batch, e.r)
			}
		}
		c.mu.Unlock()
		for _, r := range batch {
			if !c.deliver(ctx, conn, r) {
				return // the connection is gone: resend after re-registering
			}
		}
		select {
		case <-c.kick:
		case <-ctx.Done():
			return
		case <-conn.done:
			return
		}
	}
}
