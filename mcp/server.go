package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Mode selects how operations are published as MCP tools.
type Mode int

const (
	// Compact publishes exactly three outer tools: search_tools,
	// get_tool_details and call_tool.
	Compact Mode = iota
	// Direct publishes one MCP tool per operation.
	Direct
)

// String returns "compact" or "direct".
func (m Mode) String() string {
	if m == Direct {
		return "direct"
	}
	return "compact"
}

// Defaults of [Options].
const (
	DefaultTimeout        = 5 * time.Minute
	DefaultResultBudget   = 4 << 20
	WireCeiling           = 16 << 20
	DefaultPromptLimit    = 10
	DefaultPromptTTL      = 10 * time.Minute
	DefaultLedgerCapacity = 1024
)

// Options configure a [Server]. The zero value is a usable compact server.
type Options struct {
	// Name and Version identify the server to clients.
	Name, Version string
	// Mode selects compact (default) or direct publication.
	Mode Mode
	// Logger receives private failure causes and server events. Nil
	// discards them.
	Logger *slog.Logger
	// Identify names the caller of a request. Nil uses the bearer token's
	// user when there is one, "http" for other HTTP requests and "stdio"
	// otherwise.
	Identify func(ctx context.Context, extra *sdk.RequestExtra) string
	// Allow decides whether caller may see and call operation. Nil allows
	// everything. A denied operation is indistinguishable from an unknown
	// one.
	Allow func(ctx context.Context, caller, operation string) bool
	// Timeout bounds each call unless the operation sets its own. Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// Arguments is the argument budget.
	Arguments ArgumentLimits
	// ResultBudget bounds a serialised result. Zero means
	// DefaultResultBudget; a negative value leaves only the WireCeiling.
	ResultBudget int
	// PromptLimit is the number of prompts allowed in one confirmation
	// chain. Zero means DefaultPromptLimit.
	PromptLimit int
	// PromptTTL is how long a continuation token stays valid. Zero means
	// DefaultPromptTTL.
	PromptTTL time.Duration
	// LedgerCapacity bounds the number of open confirmation chains. Zero
	// means DefaultLedgerCapacity.
	LedgerCapacity int
	// Views are the approved ui:// views of MCP Apps.
	Views []View
	// Resources are published resources.
	Resources []Resource
	// SDKOptions, if non-nil, are the base options of the underlying
	// go-sdk server, for features this package does not wrap (completions,
	// resource subscriptions). Logger and the logging and tools
	// capabilities are always set by this package.
	SDKOptions *sdk.ServerOptions
}

// A Server publishes operations over MCP.
type Server struct {
	opts   Options
	log    *slog.Logger
	reg    *registry
	sdk    *sdk.Server
	views  map[string]View
	tokens *tokens

	// mu guards the fields below; wg is added to under it, after closing
	// is checked, so that Shutdown waits for every call in flight.
	mu       sync.Mutex
	closing  bool
	inflight map[*flight]struct{}
	wg       sync.WaitGroup
}

type flight struct {
	cancel context.CancelCauseFunc
}

var errShutdown = errors.New("mcp: server shutting down")

// NewServer returns a server with no operations.
func NewServer(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "reins-mcp"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ResultBudget == 0 {
		opts.ResultBudget = DefaultResultBudget
	}
	if opts.PromptLimit <= 0 {
		opts.PromptLimit = DefaultPromptLimit
	}
	if opts.PromptTTL <= 0 {
		opts.PromptTTL = DefaultPromptTTL
	}
	if opts.LedgerCapacity <= 0 {
		opts.LedgerCapacity = DefaultLedgerCapacity
	}
	opts.Arguments = opts.Arguments.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		opts:     opts,
		log:      log,
		reg:      newRegistry(),
		views:    map[string]View{},
		tokens:   newTokens(opts.LedgerCapacity),
		inflight: map[*flight]struct{}{},
	}
	caps := &sdk.ServerCapabilities{
		//lint:ignore SA1019 clients may still ask for log messages; MCP deprecates logging without a replacement
		Logging: &sdk.LoggingCapabilities{},
		Tools:   &sdk.ToolCapabilities{ListChanged: true},
	}
	for _, v := range opts.Views {
		s.views[v.URI] = v
	}
	if len(opts.Views) > 0 {
		caps.Extensions = map[string]any{appsExtension: map[string]any{}}
	}
	so := sdk.ServerOptions{}
	if opts.SDKOptions != nil {
		so = *opts.SDKOptions
	}
	so.Logger = log
	if so.Capabilities != nil {
		c := *so.Capabilities
		//lint:ignore SA1019 keeps the logging capability above (deprecated, no replacement)
		c.Logging, c.Tools = caps.Logging, caps.Tools
		if caps.Extensions != nil {
			c.Extensions = caps.Extensions
		}
		caps = &c
	}
	so.Capabilities = caps
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version}, &so)
	if opts.Mode == Compact {
		s.addCompactTools()
	} else {
		s.sdk.AddReceivingMiddleware(s.directMiddleware)
	}
	s.addResources()
	return s
}

// Add compiles and publishes operations. A definition that cannot be
// compiled (a bad name, a missing handler, an invalid schema, a duplicate)
// is reported as a [*Failure] with [CodeInvalidResult] and not published.
func (s *Server) Add(ops ...Operation) error {
	var errs []error
	for _, op := range ops {
		e, err := s.reg.add(op, s.views)
		if err != nil {
			s.log.Error("mcp: operation rejected", "operation", op.Name, "cause", err)
			errs = append(errs, err)
			continue
		}
		if s.opts.Mode == Direct {
			s.addDirectTool(e)
		}
	}
	return errors.Join(errs...)
}

// SDK returns the underlying go-sdk server, for features this package does
// not wrap (prompts, completions). Tools must be added with [Server.Add].
func (s *Server) SDK() *sdk.Server { return s.sdk }

// Run serves one connection over t until ctx is done or the peer goes
// away.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.sdk.Run(ctx, t)
}

// ServeStdio serves the MCP stdio transport on r and w. A frame larger
// than the WireCeiling is answered with a JSON-RPC error and skipped.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	lw := &lockedWriter{w: w}
	return s.sdk.Run(ctx, &sdk.IOTransport{Reader: newFrameGuard(r, lw, WireCeiling), Writer: lw, MaxLineLength: WireCeiling + 1})
}

// HTTPOptions configure [Server.HTTPHandler].
type HTTPOptions struct {
	// Stateful keeps sessions between requests, which legacy clients need
	// for server-initiated requests such as inline elicitation. The zero
	// value serves statelessly.
	Stateful bool
	// StreamResponses answers POSTs with an SSE stream, so that progress
	// and log notifications can reach the client before the result. The
	// zero value answers with plain JSON when serving statelessly, which
	// is markedly cheaper per call; stateful sessions always stream.
	StreamResponses bool
	// EventStore, if non-nil, keeps the events of stateful SSE streams so
	// that clients can resume them (SEP-1699).
	EventStore sdk.EventStore
	// DisableLocalhostProtection turns off the DNS-rebinding protection
	// that refuses non-local Host headers on loopback listeners.
	DisableLocalhostProtection bool
}

// HTTPHandler returns a streamable HTTP handler for the server. Mount it
// at /mcp. A request body larger than the WireCeiling is refused with 413
// and a JSON-RPC error.
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler {
	h := s.sdkHTTPHandler(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > WireCeiling {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = w.Write(oversizedReply(WireCeiling))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) sdkHTTPHandler(opts HTTPOptions) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk }, &sdk.StreamableHTTPOptions{
		Stateless:                    !opts.Stateful,
		JSONResponse:                 !opts.Stateful && !opts.StreamResponses,
		Logger:                       s.log,
		MaxRequestBodyBytes:          WireCeiling,
		DisableLocalhostProtection:   opts.DisableLocalhostProtection,
		EventStore:                   opts.EventStore,
		PropagateRequestCancellation: true,
	})
}

// Shutdown stops accepting calls (new calls answer unavailable), cancels
// the calls in flight (they answer cancelled), waits for them until ctx is
// done and then closes the open sessions. If ctx ends first it returns a
// [*Failure] with [CodeCleanupFailed].
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for f := range s.inflight {
		f.cancel(errShutdown)
	}
	n := len(s.inflight)
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		var open []*sdk.ServerSession
		for ss := range s.sdk.Sessions() {
			open = append(open, ss)
		}
		for _, ss := range open {
			_ = ss.Close()
		}
		return nil
	case <-ctx.Done():
		return NewFailure(CodeCleanupFailed, "shutdown ran out of budget",
			fmt.Errorf("%d calls still running: %w", n, context.Cause(ctx)))
	}
}

// begin registers a call in flight, or reports that the server is closing.
func (s *Server) begin(ctx context.Context) (context.Context, func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ctx, nil, false
	}
	ctx, cancel := context.WithCancelCause(ctx)
	f := &flight{cancel: cancel}
	s.inflight[f] = struct{}{}
	s.wg.Add(1)
	return ctx, func() {
		s.mu.Lock()
		delete(s.inflight, f)
		s.mu.Unlock()
		cancel(nil)
		s.wg.Done()
	}, true
}

// caller identifies the caller of req.
func (s *Server) caller(ctx context.Context, extra *sdk.RequestExtra) string {
	if s.opts.Identify != nil {
		return s.opts.Identify(ctx, extra)
	}
	switch {
	case extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "":
		return "user:" + extra.TokenInfo.UserID
	case extra != nil && extra.Header != nil:
		return "http"
	}
	return "stdio"
}

// visible reports whether caller may see the operation name, returning its
// entry. Unknown and denied names take the same path.
func (s *Server) visible(ctx context.Context, caller, name string) (*entry, bool) {
	e, ok := s.reg.get(name)
	allowed := s.opts.Allow == nil || s.opts.Allow(ctx, caller, name)
	if !ok || !allowed {
		return nil, false
	}
	return e, true
}

// unavailable is the single answer for unknown and denied operations.
func unavailable(name string, cause error) *Failure {
	return NewFailure(CodeUnavailable, "no operation named "+quoteName(name)+" is available", cause)
}

func quoteName(name string) string {
	if len(name) > 128 {
		name = name[:128]
	}
	return fmt.Sprintf("%q", name)
}

func newInstanceID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
