package executorhub

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/reinsdev/reins/executor"
)

// LocalOptions configure an in-process executor made by [NewLocal].
type LocalOptions struct {
	// EnvironmentID is the (cloud) environment the executor serves.
	EnvironmentID string
	// Name is the executor name (default "local").
	Name string
	// Workspace is the directory of the built-in toolset's sessions; it
	// is ignored when Sessions is set.
	Workspace string
	// Sessions opens assigned sessions (default the built-in toolset).
	Sessions executor.SessionOpener
	// Capabilities (default [BuiltinCapabilities] with the built-in toolset).
	Capabilities []string
	// MaxSessions (default 64).
	MaxSessions int
	// Logger receives diagnostics.
	Logger *slog.Logger
}

// NewLocal returns a [Client] that serves an environment from inside the
// harness process: it connects to h over an in-memory connection and runs
// exactly the protocol a remote executor runs, so cloud and self-hosted
// environments share one tool path. Start it with Run and stop it with
// Stop (or by canceling Run's context) before [Hub.Stop] returns.
func NewLocal(h *Hub, opts LocalOptions) *executor.Client {
	ln := h.localListener()
	if opts.Name == "" {
		opts.Name = "local"
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 64
	}
	return executor.NewClient(executor.Options{
		URL:          "http://reins.local",
		TokenSource:  localTokens{h: h, env: opts.EnvironmentID},
		HTTPClient:   &http.Client{Transport: &http.Transport{DialContext: ln.dial}},
		Executor:     executor.ExecutorInfo{Name: opts.Name, Version: "local"},
		Capabilities: opts.Capabilities,
		MaxSessions:  opts.MaxSessions,
		Sessions:     opts.Sessions,
		Workspace:    opts.Workspace,
		BackoffMin:   10 * time.Millisecond,
		BackoffMax:   time.Second,
		PingInterval: -1, // in memory: nothing to cut
		Logger:       opts.Logger,
	})
}

// localTokens issues executor tokens for the local executor directly.
type localTokens struct {
	h   *Hub
	env string
}

func (t localTokens) Token(ctx context.Context) (executor.Token, error) {
	if t.env == "" {
		return executor.Token{}, errors.New("executor: a local executor needs an environment")
	}
	exp := t.h.opts.Now().Add(t.h.opts.TokenTTL)
	return executor.Token{
		Token:     t.h.signer.issue(principal{EnvironmentID: t.env}, "", exp),
		ExpiresAt: exp,
		URL:       "ws://reins.local/v1/executor/connect",
	}, nil
}

// localConnKey marks the context of connections to the hub's in-memory
// listener.
type localConnKey struct{}

// markLocalConn is the ConnContext of the in-memory listener's server.
func markLocalConn(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, localConnKey{}, true)
}

// isLocalConn reports whether a request came through the in-memory
// listener, that is from an executor made by [NewLocal].
func isLocalConn(ctx context.Context) bool {
	local, _ := ctx.Value(localConnKey{}).(bool)
	return local
}

// localListener starts, once, the hub's in-memory HTTP server.
func (h *Hub) localListener() *memListener {
	h.local.once.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.local.ln = newMemListener()
		h.local.done = make(chan struct{})
		h.local.srv = &http.Server{Handler: h, ConnContext: markLocalConn}
		go func() { // owned by the hub: Stop closes the server
			defer close(h.local.done)
			h.local.srv.Serve(h.local.ln)
		}()
	})
	return h.local.ln
}
