package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/reinsdev/reins/connector"
	"github.com/reinsdev/reins/harness"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
	"github.com/reinsdev/reins/vault"
)

// mcpHost is the harness's MCPHost: one connector pool per session,
// reused across turns, closed when the session's runner leaves.
type mcpHost struct {
	creds *connector.VaultCredentials
	hc    *http.Client // carries the MCP traffic of every pool
	log   *slog.Logger

	mu    sync.Mutex
	pools map[string]*connector.Pool
}

// newMCPHost returns a host whose pools connect with streams and refresh
// OAuth tokens with requests; both should come from netguard.Guard.Client.
func newMCPHost(st store.Store, keys *vault.Keyring, streams, requests *http.Client, log *slog.Logger) *mcpHost {
	creds := &connector.VaultCredentials{Store: st, Keyring: keys, HTTPClient: requests, Logger: log}
	return &mcpHost{creds: creds, hc: streams, log: log, pools: map[string]*connector.Pool{}}
}

func (m *mcpHost) pool(sess *ma.Session) (*connector.Pool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pools[sess.ID]; p != nil {
		return p, nil
	}
	servers := make([]connector.Server, len(sess.Agent.MCPServers))
	for i, s := range sess.Agent.MCPServers {
		servers[i] = connector.Server{Name: s.Name, URL: s.URL}
	}
	p, err := connector.NewPool(connector.Config{Servers: servers, VaultIDs: sess.VaultIDs, Credentials: m.creds, HTTPClient: m.hc, Logger: m.log})
	if err != nil {
		return nil, err
	}
	m.pools[sess.ID] = p
	return p, nil
}

// mcpError maps a connector error to the harness's.
func mcpError(err error) error {
	var ce *connector.Error
	if errors.As(err, &ce) {
		return &harness.MCPError{Type: ce.Kind.SessionErrorType(), Server: ce.ServerName, Message: ce.Message, Retryable: ce.Retryable(), Err: err}
	}
	return err
}

// Tools implements harness.MCPHost.
func (m *mcpHost) Tools(ctx context.Context, sess *ma.Session) ([]harness.MCPTool, error) {
	p, err := m.pool(sess)
	if err != nil {
		return nil, err
	}
	tools, err := p.Tools(ctx)
	if err != nil {
		return nil, mcpError(err)
	}
	out := make([]harness.MCPTool, len(tools))
	for i, t := range tools {
		out[i] = harness.MCPTool{Name: t.Name, Server: t.Server, Tool: t.ToolName, Description: t.Description, InputSchema: t.InputSchema}
	}
	return out, nil
}

// Call implements harness.MCPHost.
func (m *mcpHost) Call(ctx context.Context, sess *ma.Session, server, tool string, input json.RawMessage) (harness.ToolResult, error) {
	p, err := m.pool(sess)
	if err != nil {
		return harness.ToolResult{}, err
	}
	res, err := p.Call(ctx, server, tool, input)
	if err != nil {
		return harness.ToolResult{}, mcpError(err)
	}
	content := res.Content
	if len(content) == 0 {
		content = []ma.ContentBlock{{Type: "text", Text: "(no output)"}}
	}
	return harness.ToolResult{Content: content, IsError: res.IsError}, nil
}

// Release implements harness.MCPHost.
func (m *mcpHost) Release(sessionID string) {
	m.mu.Lock()
	p := m.pools[sessionID]
	delete(m.pools, sessionID)
	m.mu.Unlock()
	if p != nil {
		p.Close()
	}
}
