// Package mcphost is the tool host's part that reaches the remote MCP
// servers of sessions' agents: one connector pool per session.
package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/reinsdev/reins/internal/connector"
	"github.com/reinsdev/reins/internal/tool"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

// Host is the harness's tool.MCPHost: one connector pool per session,
// reused across turns while the session's MCP servers stay the same,
// closed when the session's runner leaves.
type Host struct {
	creds *connector.VaultCredentials
	hc    *http.Client // carries the MCP traffic of every pool
	log   *slog.Logger

	mu    sync.Mutex // guards pools
	pools map[string]*sessionPool
}

// sessionPool is a session's pool and the servers it was made for.
type sessionPool struct {
	servers []connector.Server
	pool    *connector.Pool
}

// New returns a host whose pools connect with streams and refresh OAuth
// tokens with requests; both should come from netguard.Guard.Client.
func New(st connector.VaultStore, keys *vault.Keyring, streams, requests *http.Client, log *slog.Logger) *Host {
	creds := &connector.VaultCredentials{Store: st, Keyring: keys, HTTPClient: requests, Logger: log}
	return &Host{creds: creds, hc: streams, log: log, pools: map[string]*sessionPool{}}
}

// pool returns the session's pool for its current MCP servers. When they
// changed (a session update between turns), the old pool is closed and a
// new one made.
func (m *Host) pool(sess *ma.Session) (*connector.Pool, error) {
	servers := make([]connector.Server, len(sess.Agent.MCPServers))
	for i, s := range sess.Agent.MCPServers {
		servers[i] = connector.Server{Name: s.Name, URL: s.URL}
	}
	m.mu.Lock()
	old := m.pools[sess.ID]
	if old != nil && slices.Equal(old.servers, servers) {
		m.mu.Unlock()
		return old.pool, nil
	}
	p, err := connector.NewPool(connector.Config{Servers: servers, VaultIDs: sess.VaultIDs, Credentials: m.creds, HTTPClient: m.hc, Logger: m.log})
	if err == nil {
		m.pools[sess.ID] = &sessionPool{servers: servers, pool: p}
	}
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if old != nil {
		// The session's runner uses one pool at a time, and a session's
		// servers change only between turns: nothing runs on the old one.
		old.pool.Close()
	}
	return p, nil
}

// mcpError maps a connector error to the harness's.
func mcpError(err error) error {
	var ce *connector.Error
	if errors.As(err, &ce) {
		return &tool.MCPError{Type: ce.Kind.SessionErrorType(), Server: ce.ServerName, Message: ce.Message, Retryable: ce.Retryable(), Err: err}
	}
	return err
}

// Tools implements tool.MCPHost.
func (m *Host) Tools(ctx context.Context, sess *ma.Session) ([]tool.MCPTool, error) {
	p, err := m.pool(sess)
	if err != nil {
		return nil, err
	}
	tools, err := p.Tools(ctx)
	if err != nil {
		return nil, mcpError(err)
	}
	out := make([]tool.MCPTool, len(tools))
	for i, t := range tools {
		out[i] = tool.MCPTool{Name: t.Name, Server: t.Server, Tool: t.ToolName, Description: t.Description, InputSchema: t.InputSchema}
	}
	return out, nil
}

// Call implements tool.MCPHost.
func (m *Host) Call(ctx context.Context, sess *ma.Session, server, name string, input json.RawMessage) (tool.Result, error) {
	p, err := m.pool(sess)
	if err != nil {
		return tool.Result{}, err
	}
	res, err := p.Call(ctx, server, name, input)
	if err != nil {
		return tool.Result{}, mcpError(err)
	}
	content := res.Content
	if len(content) == 0 {
		content = []ma.ContentBlock{{Type: "text", Text: "(no output)"}}
	}
	return tool.Result{Content: content, IsError: res.IsError}, nil
}

// Release implements tool.MCPHost.
func (m *Host) Release(sessionID string) {
	m.mu.Lock()
	p := m.pools[sessionID]
	delete(m.pools, sessionID)
	m.mu.Unlock()
	if p != nil {
		p.pool.Close()
	}
}
