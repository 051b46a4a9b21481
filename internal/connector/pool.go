package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/sandbox/netguard"
)

// Default timeouts.
const (
	DefaultConnectTimeout = 15 * time.Second
	DefaultListTimeout    = 30 * time.Second
	DefaultCallTimeout    = 5 * time.Minute
	closeTimeout          = 5 * time.Second
)

// Server is an MCP server of an agent (mcp_servers[]: name, url).
type Server struct {
	Name string
	URL  string
}

// Config configures a Pool.
type Config struct {
	// Servers are the agent's MCP servers, in declaration order.
	Servers []Server
	// VaultIDs are the session's vaults, searched in order for a
	// credential whose mcp_server_url matches a server's URL.
	VaultIDs []string
	// Credentials looks tokens up; nil sends no Authorization header.
	Credentials Credentials
	// HTTPClient carries the MCP traffic: its Transport and CheckRedirect
	// are used, its Timeout is not (streams are long-lived; the pool's own
	// timeouts apply). Build it with netguard.Guard.Client, which refuses
	// internal addresses and redirects to another origin; nil means a
	// client of the zero Guard. Whatever the client, the bearer token is
	// sent only to the origin of the server's URL.
	HTTPClient *http.Client
	// Timeouts of connecting (including the MCP handshake), of listing a
	// server's tools, and of one tool call.
	ConnectTimeout, ListTimeout, CallTimeout time.Duration
	Logger                                   *slog.Logger
}

// Tool is a tool of one MCP server under its model-facing name.
type Tool struct {
	// Name is unique in the pool and matches [A-Za-z0-9_-]{1,128}:
	// mcp__<server>__<tool>, sanitized.
	Name string
	// Server is the MCP server's name (mcp_servers[].name) and ToolName
	// the tool's name on that server (what mcp_toolset configs name and
	// agent.mcp_tool_use reports).
	Server      string
	ToolName    string
	Description string
	InputSchema json.RawMessage
}

// Pool holds one session's connections to its agent's MCP servers. It
// connects to a server on first use, reconnects when a connection breaks,
// and is safe for concurrent use.
type Pool struct {
	cfg   Config
	log   *slog.Logger
	order []string
	conns map[string]*conn

	release func() // closes the idle connections of a client the pool made; may be nil

	mu     sync.Mutex // guards the fields below
	closed bool
	byName map[string]Tool
}

// NewPool returns a pool for the servers; it connects to nothing yet.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ListTimeout <= 0 {
		cfg.ListTimeout = DefaultListTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	p := &Pool{cfg: cfg, log: cfg.Logger, conns: map[string]*conn{}, byName: map[string]Tool{}}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = (&netguard.Guard{}).Client(0)
		p.release = hc.CloseIdleConnections
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range cfg.Servers {
		if s.Name == "" {
			return nil, errors.New("connector: a server has no name")
		}
		if _, dup := p.conns[s.Name]; dup {
			return nil, fmt.Errorf("connector: two servers named %q", s.Name)
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("connector: server %q: %q is not an http(s) URL", s.Name, s.URL)
		}
		rt := &authTransport{base: base, origin: u}
		p.conns[s.Name] = &conn{p: p, srv: s, rt: rt, hc: &http.Client{Transport: rt, CheckRedirect: hc.CheckRedirect}}
		p.order = append(p.order, s.Name)
	}
	return p, nil
}

// Tools lists the tools of every server, connecting where needed, in
// server declaration order, and assigns their model-facing names. It fails
// with the *Error of the first server that cannot be used; the names of
// the previous listing stay valid then.
func (p *Pool) Tools(ctx context.Context) ([]Tool, error) {
	if p.isClosed() {
		return nil, ErrClosed
	}
	var all []Tool
	for _, name := range p.order {
		ts, err := p.conns[name].tools(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
	}
	keys := make([]toolKey, len(all))
	for i, t := range all {
		keys[i] = toolKey{t.Server, t.ToolName}
	}
	names := modelNames(keys)
	byName := make(map[string]Tool, len(all))
	for i := range all {
		all[i].Name = names[keys[i]]
		byName[all[i].Name] = all[i]
	}
	p.mu.Lock()
	p.byName = byName
	p.mu.Unlock()
	return all, nil
}

// ServerTools lists the tools of one server (model-facing names are only
// assigned by Tools).
func (p *Pool) ServerTools(ctx context.Context, server string) ([]Tool, error) {
	c, err := p.conn(server)
	if err != nil {
		return nil, err
	}
	return c.tools(ctx)
}

// Lookup returns the tool with a model-facing name from the last Tools.
func (p *Pool) Lookup(name string) (Tool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.byName[name]
	return t, ok
}

// Call calls a server's tool with the JSON object input. A tool that fails,
// a JSON-RPC error for the call (unknown tool, invalid arguments) and a
// call that exceeds CallTimeout are a Result with IsError. A cancelled ctx
// returns ctx's error (the server is told to cancel the call). A server
// that cannot be used is an *Error; when the request provably did not
// reach the tool (the server restarted and forgot the session, or refused
// the connection) the pool reconnects and calls once more.
func (p *Pool) Call(ctx context.Context, server, tool string, input json.RawMessage) (*Result, error) {
	c, err := p.conn(server)
	if err != nil {
		return nil, err
	}
	return c.call(ctx, tool, input)
}

// Close closes every connection. Calls in flight fail; later calls return
// ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range p.conns {
		wg.Go(c.close)
	}
	wg.Wait()
	if p.release != nil {
		p.release()
	}
	return nil
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Pool) conn(server string) (*conn, error) {
	if p.isClosed() {
		return nil, ErrClosed
	}
	c, ok := p.conns[server]
	if !ok {
		return nil, fmt.Errorf("connector: no MCP server named %q", server)
	}
	return c, nil
}

// authTransport sets the bearer token on requests to the server's origin
// (never on others: an SSE server names the endpoint messages are posted
// to, and a redirect may lead elsewhere), and remembers the last error
// status the server answered and the last address the guard refused, to
// classify failures the MCP client reports only as text.
//
// It also ties every request to the life of the current connection: the
// MCP client sends some requests (cancellation notices, session deletes) on
// contexts of its own, and a hung server must not hold them after the
// connection is given up.
type authTransport struct {
	base   http.RoundTripper
	origin *url.URL // the server's URL
	token  atomic.Pointer[string]
	status atomic.Int64
	denied atomic.Pointer[netguard.DeniedError]
	life   atomic.Pointer[context.Context]
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := func() bool { return true }
	if life := t.life.Load(); life != nil {
		stop = context.AfterFunc(*life, cancel)
	}
	done := func() { stop(); cancel() }
	req = req.Clone(ctx)
	if tok := t.token.Load(); tok != nil && *tok != "" && netguard.SameOrigin(req.URL, t.origin) {
		req.Header.Set("Authorization", "Bearer "+*tok)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		done()
		if d, ok := errors.AsType[*netguard.DeniedError](err); ok {
			t.denied.Store(d)
		}
		return nil, err
	}
	if resp.StatusCode >= 300 { // a redirect here is one the client did not follow
		t.status.Store(int64(resp.StatusCode))
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

// reset forgets the last error status and refusal.
func (t *authTransport) reset() {
	t.status.Store(0)
	t.denied.Store(nil)
}

// doneBody runs done once when the body is closed.
type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// conn is the connection to one server.
type conn struct {
	p   *Pool
	srv Server
	rt  *authTransport
	hc  *http.Client

	mu        sync.Mutex // guards the fields below; held while connecting
	session   *mcp.ClientSession
	cancel    context.CancelFunc // ends the session's transport
	withToken bool               // the token came from a credential
	closed    bool
}

// token looks the server's token up and installs it.
func (c *conn) token(ctx context.Context, force bool) error {
	creds := c.p.cfg.Credentials
	if creds == nil {
		return nil
	}
	var tok string
	var err error
	if r, ok := creds.(Refresher); ok && force {
		tok, err = r.RefreshToken(ctx, c.p.cfg.VaultIDs, c.srv.URL)
	} else {
		tok, err = creds.Token(ctx, c.p.cfg.VaultIDs, c.srv.URL)
	}
	switch {
	case err == nil:
		c.withToken = true
		c.rt.token.Store(&tok)
		return nil
	case errors.Is(err, ErrNoCredential):
		c.withToken = false
		c.rt.token.Store(nil)
		return nil
	case errors.Is(err, ErrCredentialUnusable):
		return &Error{Kind: AuthenticationFailed, ServerName: c.srv.Name, Message: err.Error(), Err: err}
	}
	return fmt.Errorf("mcp server %q: credentials: %w", c.srv.Name, err)
}

// get returns the live session, connecting if there is none. The token
// is looked up again each time, so an expired OAuth token is refreshed
// before use and a rotated one is picked up.
func (c *conn) get(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if err := c.token(ctx, false); err != nil {
		return nil, err
	}
	if c.session != nil {
		return c.session, nil
	}
	s, cancel, err := c.dial(ctx)
	if err != nil && c.authRejected() && c.withToken {
		// The server rejected a token that had not expired: refresh it
		// once if the credential can be refreshed.
		if _, ok := c.p.cfg.Credentials.(Refresher); ok {
			terr := c.token(ctx, true)
			var re *RefreshError
			if errors.As(terr, &re) {
				return nil, terr
			}
			if terr == nil {
				s, cancel, err = c.dial(ctx)
			}
		}
	}
	if err != nil {
		return nil, c.classify(ctx, "connect", err, false)
	}
	c.p.log.Info("mcp server connected", "mcp_server_name", c.srv.Name, "url", c.srv.URL)
	c.session, c.cancel = s, cancel
	return s, nil
}

// dial connects with the streamable HTTP transport, or with the SSE
// transport when the endpoint does not speak streamable HTTP.
func (c *conn) dial(ctx context.Context) (*mcp.ClientSession, context.CancelFunc, error) {
	// The transport lives as long as the session, not as ctx; ctx and the
	// connect timeout only bound the connecting.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.rt.life.Store(&life)
	timer := time.AfterFunc(c.p.cfg.ConnectTimeout, cancel)
	stop := context.AfterFunc(ctx, cancel)
	client := mcp.NewClient(&mcp.Implementation{Name: "reins", Version: "1"}, nil)
	c.rt.reset()
	s, err := client.Connect(life, &mcp.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: c.hc, MaxRetries: 1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		switch c.rt.status.Load() {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			c.rt.status.Store(0)
			if s2, err2 := client.Connect(life, &mcp.SSEClientTransport{Endpoint: c.srv.URL, HTTPClient: c.hc}, nil); err2 == nil {
				s, err = s2, nil
			} else if c.authRejected() {
				err = err2
			}
		}
	}
	fired := !timer.Stop()
	interrupted := !stop()
	if err == nil && (fired || interrupted) {
		s.Close()
		err = context.DeadlineExceeded
		if interrupted {
			err = ctx.Err()
		}
	}
	if err != nil {
		cancel()
		if fired && ctx.Err() == nil {
			err = fmt.Errorf("timed out after %s: %w", c.p.cfg.ConnectTimeout, err)
		}
		return nil, nil, err
	}
	return s, cancel, nil
}

func (c *conn) authRejected() bool {
	st := c.rt.status.Load()
	return st == http.StatusUnauthorized || st == http.StatusForbidden
}

// classify turns a failure of op into an *Error, or into ctx's error when
// the caller gave up.
func (c *conn) classify(ctx context.Context, op string, err error, timedOut bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if d := c.rt.denied.Load(); d != nil {
		return &Error{Kind: ConnectionFailed, ServerName: c.srv.Name, Message: fmt.Sprintf("%s: %s is refused: %v", op, c.srv.URL, d), Err: d}
	}
	st := c.rt.status.Load()
	switch {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		msg := fmt.Sprintf("%s: the server answered %d %s", op, st, http.StatusText(int(st)))
		if !c.withToken {
			msg += "; no credential in the session's vaults matches its URL " + c.srv.URL
		}
		return &Error{Kind: AuthenticationFailed, ServerName: c.srv.Name, Message: msg, Err: err}
	case st >= 500:
		return &Error{Kind: ConnectionFailed, ServerName: c.srv.Name, Message: fmt.Sprintf("%s: the server answered %d %s", op, st, http.StatusText(int(st))), Err: err}
	case st >= 300 && st < 400:
		return &Error{Kind: ConnectionFailed, ServerName: c.srv.Name, Message: fmt.Sprintf("%s: the server answered %d %s; reins follows redirects only within the origin of %s", op, st, http.StatusText(int(st)), c.srv.URL), Err: err}
	case timedOut || errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: ConnectionFailed, ServerName: c.srv.Name, Message: fmt.Sprintf("%s: timed out", op), Err: err}
	}
	return &Error{Kind: ConnectionFailed, ServerName: c.srv.Name, Message: fmt.Sprintf("%s: %v", op, err), Err: err}
}

// drop forgets a broken session (if it is still the current one).
func (c *conn) drop(s *mcp.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != s || s == nil {
		return
	}
	c.session = nil
	cancel := c.cancel
	cancel() // no DELETE to a server that is gone
	s.Close()
	c.p.log.Info("mcp server connection dropped", "mcp_server_name", c.srv.Name)
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.session == nil {
		return
	}
	t := time.AfterFunc(closeTimeout, c.cancel) // bound the DELETE
	c.session.Close()
	t.Stop()
	c.cancel()
	c.session = nil
}

func (c *conn) tools(ctx context.Context) ([]Tool, error) {
	for attempt := 0; ; attempt++ {
		s, err := c.get(ctx)
		if err != nil {
			return nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, c.p.cfg.ListTimeout)
		c.rt.reset()
		out, err := listAll(lctx, s, c.srv.Name)
		timedOut := lctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.drop(s)
		// Listing is idempotent: after a broken connection (a restarted
		// server), connect again once. A server that hangs is not waited
		// for twice.
		if attempt == 0 && !timedOut {
			c.p.log.Info("mcp tools/list failed; reconnecting", "mcp_server_name", c.srv.Name, "err", err)
			continue
		}
		return nil, c.classify(ctx, "tools/list", err, timedOut)
	}
}

func (c *conn) call(ctx context.Context, tool string, input json.RawMessage) (*Result, error) {
	var args any = map[string]any{}
	if len(input) > 0 && string(input) != "null" {
		args = input
	}
	for attempt := 0; ; attempt++ {
		s, err := c.get(ctx)
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, c.p.cfg.CallTimeout)
		c.rt.reset()
		res, err := s.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		timedOut := cctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return convertResult(res), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if timedOut {
			return errorResult("the MCP tool %q of server %q did not answer within %s", tool, c.srv.Name, c.p.cfg.CallTimeout), nil
		}
		st := c.rt.status.Load()
		var rpcErr *jsonrpc.Error
		if st < 400 && errors.As(err, &rpcErr) && rpcErr.Code != codeRejected && !errors.Is(err, mcp.ErrSessionMissing) && !errors.Is(err, mcp.ErrConnectionClosed) {
			// The server answered the call with an error: the model reads it.
			return errorResult("%s", rpcErr.Message), nil
		}
		c.drop(s)
		if attempt == 0 && notDelivered(err, st) {
			c.p.log.Info("mcp tools/call not delivered; reconnecting", "mcp_server_name", c.srv.Name, "err", err)
			continue
		}
		return nil, c.classify(ctx, "tools/call "+tool, err, false)
	}
}

// codeRejected is the code of the go-sdk's "rejected by transport" error:
// the request did not get an answer from the server.
const codeRejected = -32005

// notDelivered reports whether a failed call provably did not reach the
// tool, so calling again cannot run it twice.
func notDelivered(err error, status int64) bool {
	if status == http.StatusUnauthorized || status == http.StatusForbidden || errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func listAll(ctx context.Context, s *mcp.ClientSession, server string) ([]Tool, error) {
	out := []Tool{}
	params := &mcp.ListToolsParams{}
	for {
		res, err := s.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			schema, _ := json.Marshal(t.InputSchema)
			out = append(out, Tool{Server: server, ToolName: t.Name, Description: t.Description, InputSchema: schema})
		}
		if res.NextCursor == "" {
			return out, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}
