// Package mcptest runs real MCP servers (the official go-sdk server over
// streamable HTTP, or the older SSE transport) on loopback for tests.
package mcptest

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures a Server.
type Options struct {
	// Token, if set, is the bearer token the server requires (401
	// otherwise).
	Token string
	// SSE serves the 2024-11-05 SSE transport instead of streamable HTTP.
	SSE bool
	// Status, if not zero, is answered to every request (e.g. 503).
	Status int
}

// Server is an MCP server on a loopback port with the tools:
//   - echo {text}: returns the text;
//   - fail {}: an isError result with a reins failure envelope;
//   - wait {}: blocks until the call is cancelled.
type Server struct {
	t    *testing.T
	opts Options
	addr string

	mu      sync.Mutex // guards srv, mcp and stopped
	srv     *http.Server
	mcp     *mcp.Server
	stopped chan struct{} // closed by Stop: ends waiting tools

	// Calls counts tools/call requests that reached a tool.
	Calls atomic.Int64
	// Cancelled counts wait calls that ended because they were cancelled.
	Cancelled atomic.Int64
	started   chan struct{}
	// Tokens records the bearer tokens the server saw.
	tokens sync.Map
}

// Start starts a server; it is stopped when the test ends.
func Start(t *testing.T, opts Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, opts: opts, addr: ln.Addr().String(), started: make(chan struct{}, 16)}
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's MCP endpoint.
func (s *Server) URL() string { return "http://" + s.addr + "/mcp" }

// Started receives a value each time the wait tool begins.
func (s *Server) Started() <-chan struct{} { return s.started }

// SawToken reports whether a request carried the bearer token.
func (s *Server) SawToken(tok string) bool { _, ok := s.tokens.Load(tok); return ok }

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

func (s *Server) mcpServer(stopped <-chan struct{}) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes its input."}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		s.Calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails."}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		s.Calls.Add(1)
		env := `{"failure":{"code":"command_failed","message":"the command exited with status 2","retryable":false}}`
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: env}},
			StructuredContent: map[string]any{"failure": map[string]any{"code": "command_failed", "message": "the command exited with status 2", "retryable": false}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "Blocks until cancelled."}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		s.Calls.Add(1)
		select {
		case s.started <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			s.Cancelled.Add(1)
			return nil, nil, ctx.Err()
		case <-stopped:
			return nil, nil, errors.New("server stopped")
		}
	})
	return srv
}

func (s *Server) handler(m *mcp.Server) http.Handler {
	var h http.Handler
	if s.opts.SSE {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return m }, nil)
	} else {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, nil)
	}
	if s.opts.Token != "" {
		want := s.opts.Token
		h = auth.RequireBearerToken(func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
		}, nil)(h)
	}
	inner := h
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := cutBearer(r.Header.Get("Authorization")); ok {
			s.tokens.Store(tok, true)
		}
		if s.opts.Status != 0 {
			http.Error(w, http.StatusText(s.opts.Status), s.opts.Status)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

func cutBearer(h string) (string, bool) {
	const p = "Bearer "
	if len(h) > len(p) && h[:len(p)] == p {
		return h[len(p):], true
	}
	return "", false
}

func (s *Server) serve(ln net.Listener) {
	stopped := make(chan struct{})
	m := s.mcpServer(stopped)
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.handler(m))
	srv := &http.Server{Handler: mux}
	s.mu.Lock()
	s.srv, s.mcp, s.stopped = srv, m, stopped
	s.mu.Unlock()
	go srv.Serve(ln)
}

// Stop stops the server and drops its connections and sessions.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, m := s.srv, s.mcp
	s.srv, s.mcp = nil, nil
	if srv != nil {
		close(s.stopped)
	}
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
		for ss := range m.Sessions() {
			ss.Close()
		}
	}
}

// Restart starts a new server process on the same address: a fresh MCP
// server that knows none of the old sessions.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	s.serve(ln)
}

// ForgetSessions closes the server's MCP sessions but keeps serving: the
// next request with an old session id is answered 404.
func (s *Server) ForgetSessions() {
	s.mu.Lock()
	m := s.mcp
	s.mu.Unlock()
	for ss := range m.Sessions() {
		ss.Close()
	}
}
