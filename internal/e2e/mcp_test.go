package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/mcptest"
	ma "github.com/reinsdev/reins/managedagents"
)

// mcpSession creates an agent using one MCP server (toolset policy given)
// and a session with a vault holding a static bearer token for it.
func (s *server) mcpSession(t *testing.T, srv *mcptest.Server, token, policy string) string {
	t.Helper()
	var v struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]any{"display_name": "test"}, &v); err != nil {
		t.Fatal(err)
	}
	if token != "" {
		if _, err := call(s.url, s.key, "POST", "/v1/vaults/"+v.ID+"/credentials", map[string]any{
			"auth": map[string]any{"type": "static_bearer", "mcp_server_url": srv.URL(), "token": token}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var a ma.Agent
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{"name": "mcp", "model": "scripted",
		"mcp_servers": []any{map[string]any{"type": "url", "name": "tools", "url": srv.URL()}},
		"tools":       []any{map[string]any{"type": "mcp_toolset", "mcp_server_name": "tools", "default_config": map[string]any{"permission_policy": map[string]any{"type": policy}}}},
	}, &a); err != nil {
		t.Fatal(err)
	}
	var sess ma.Session
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": s.newEnv(t, "mcp-"+ids.New("")).ID, "vault_ids": []string{v.ID}}, &sess); err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

func TestMCPToolThroughStaticBearer(t *testing.T) {
	s := start(t, options{})
	srv := mcptest.Start(t, mcptest.Options{Token: "s3cret-token"})
	sid := s.mcpSession(t, srv, "s3cret-token", "always_allow")
	st := s.openStream(t, sid)

	s.send(t, sid, userMessage(`@tool mcp__tools__echo {"text":"hello over MCP"}`+"\n@then done"))
	got := st.until(isIdle)
	var use, result frame
	for _, f := range got {
		switch f.Type {
		case "agent.mcp_tool_use":
			use = f
		case "agent.mcp_tool_result":
			result = f
		}
	}
	if use.MCPServerName != "tools" || use.Name != "echo" || use.EvaluatedPermission != "allow" {
		t.Fatalf("mcp tool use %+v (%v)", use, types(got))
	}
	if result.MCPToolUseID != use.ID || (result.IsError != nil && *result.IsError) || !strings.Contains(result.Content[0].Text, "hello over MCP") {
		t.Fatalf("mcp tool result %+v", result)
	}
	if !srv.SawToken("s3cret-token") {
		t.Fatal("the server never saw the vault's token")
	}

	// A tool that fails is a result the model reads, not a session error.
	s.send(t, sid, userMessage(`@tool mcp__tools__fail {}`))
	got = st.until(isIdle)
	for _, f := range got {
		if f.Type == "session.error" {
			t.Fatalf("a failing tool became a session error: %+v", f.Error)
		}
		if f.Type == "agent.mcp_tool_result" && (f.IsError == nil || !*f.IsError) {
			t.Fatalf("failing tool result %+v", f)
		}
	}

	// The server restarts between turns: the pool reconnects.
	srv.Restart()
	s.send(t, sid, userMessage(`@tool mcp__tools__echo {"text":"after restart"}`))
	got = st.until(isIdle)
	ok := false
	for _, f := range got {
		ok = ok || (f.Type == "agent.mcp_tool_result" && strings.Contains(f.Content[0].Text, "after restart"))
	}
	if !ok {
		t.Fatalf("no result after the restart: %v", types(got))
	}
}

func TestMCPFailuresAreSessionErrors(t *testing.T) {
	s := start(t, options{})
	// Wrong token: authentication failed, exhausted at once.
	srv := mcptest.Start(t, mcptest.Options{Token: "right"})
	sid := s.mcpSession(t, srv, "wrong", "always_allow")
	st := s.openStream(t, sid)
	s.send(t, sid, userMessage("hello"))
	got := st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"mcp_authentication_failed_error/exhausted"}) {
		t.Fatalf("wrong token: %v (%v)", e, types(got))
	}
	for _, f := range got {
		if f.Type == "session.error" && f.Error.MCPServerName != "tools" {
			t.Fatalf("mcp_server_name %q", f.Error.MCPServerName)
		}
	}

	// Server down: connection failed, retried, then exhausted.
	down := mcptest.Start(t, mcptest.Options{})
	sid = s.mcpSession(t, down, "", "always_allow")
	down.Stop()
	st = s.openStream(t, sid)
	s.send(t, sid, userMessage("hello"))
	got = st.until(isIdle)
	want := []string{"mcp_connection_failed_error/retrying", "mcp_connection_failed_error/retrying", "mcp_connection_failed_error/exhausted"}
	if e := errorStatuses(got); !slices.Equal(e, want) || got[len(got)-1].StopReason.Type != "retries_exhausted" {
		t.Fatalf("server down: %v", e)
	}
}

func TestMCPAlwaysAskDenied(t *testing.T) {
	s := start(t, options{})
	srv := mcptest.Start(t, mcptest.Options{})
	sid := s.mcpSession(t, srv, "", "always_ask")
	st := s.openStream(t, sid)
	s.send(t, sid, userMessage(`@tool mcp__tools__wait {}`))
	got := st.until(isIdle)
	use := got[len(got)-4]
	if use.Type != "agent.mcp_tool_use" || use.EvaluatedPermission != "ask" || use.Evaluation == nil || use.Evaluation.Type != "always_ask" ||
		got[len(got)-1].StopReason.Type != "requires_action" {
		t.Fatalf("always_ask: %v %+v", types(got), use)
	}
	body := map[string]any{"events": []any{map[string]any{"type": "user.tool_confirmation", "tool_use_id": use.ID, "result": "deny", "deny_message": "no"}}}
	if _, err := call(s.url, s.key, "POST", "/v1/sessions/"+sid+"/events", body, nil); err != nil {
		t.Fatal(err)
	}
	got = st.until(isIdle)
	select {
	case <-srv.Started():
		t.Fatal("a denied MCP tool was called")
	case <-time.After(100 * time.Millisecond):
	}
	if slices.Contains(types(got), "agent.mcp_tool_result") || got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("after deny: %v", types(got))
	}
}

func TestMCPInterruptCancelsCall(t *testing.T) {
	s := start(t, options{})
	srv := mcptest.Start(t, mcptest.Options{})
	sid := s.mcpSession(t, srv, "", "always_allow")
	st := s.openStream(t, sid)
	s.send(t, sid, userMessage(`@tool mcp__tools__wait {}`))
	select {
	case <-srv.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("the wait tool never started")
	}
	s.send(t, sid, interruptEvent())
	got := st.until(isIdle)
	if got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("after interrupt: %v", types(got))
	}
}

func TestCredentialHostUnreachable(t *testing.T) {
	s := start(t, options{})
	var env ma.Environment
	if _, err := call(s.url, s.key, "POST", "/v1/environments", map[string]any{"name": "locked",
		"config": map[string]any{"type": "cloud", "networking": map[string]any{"type": "limited", "allowed_hosts": []string{"api.github.com", "*.example.com"}}}}, &env); err != nil {
		t.Fatal(err)
	}
	var v struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]any{"display_name": "secrets"}, &v); err != nil {
		t.Fatal(err)
	}
	var cred struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults/"+v.ID+"/credentials", map[string]any{"auth": map[string]any{
		"type": "environment_variable", "secret_name": "STRIPE_KEY", "secret_value": "sk_live_dont_leak",
		"networking": map[string]any{"type": "limited", "allowed_hosts": []string{"api.example.com", "api.stripe.com"}}}}, &cred); err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted")
	var sess ma.Session
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": env.ID, "vault_ids": []string{v.ID}}, &sess); err != nil {
		t.Fatal(err)
	}
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("hello"))
	got := st.until(isIdle)
	var e *ma.SessionError
	for _, f := range got {
		if f.Type == "session.error" {
			e = f.Error
		}
		if f.Type == "span.model_request_start" {
			t.Fatal("the model was called although a credential cannot be used")
		}
	}
	if e == nil || e.Type != "credential_host_unreachable_error" || e.RetryStatus.Type != "exhausted" || e.CredentialID != cred.ID || e.VaultID != v.ID ||
		!strings.Contains(e.Message, "api.stripe.com") || strings.Contains(e.Message, "sk_live") {
		t.Fatalf("error %+v", e)
	}
	if got[len(got)-1].StopReason.Type != "retries_exhausted" {
		t.Fatalf("idle %+v", got[len(got)-1].StopReason)
	}
	// Unknown vault ids in a session are refused.
	if st, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": env.ID, "vault_ids": []string{"vlt_nope"}}, nil); st != 404 {
		t.Fatalf("unknown vault: %d %v", st, err)
	}
}

// TestNoSecretInEventsOrDatabase: the vault's secrets never reach the
// event log, API responses or the database file in clear.
func TestNoSecretInEventsOrDatabase(t *testing.T) {
	dir := t.TempDir()
	s := start(t, options{dir: dir})
	srv := mcptest.Start(t, mcptest.Options{Token: "tok-visible-nowhere"})
	sid := s.mcpSession(t, srv, "tok-visible-nowhere", "always_allow")
	st := s.openStream(t, sid)
	s.send(t, sid, userMessage(`@tool mcp__tools__echo {"text":"x"}`))
	st.until(isIdle)
	for _, path := range []string{"/v1/sessions/" + sid + "/events?limit=1000", "/v1/sessions/" + sid} {
		var raw json.RawMessage
		if _, err := call(s.url, s.key, "GET", path, nil, &raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "tok-visible-nowhere") {
			t.Fatalf("%s leaks the token", path)
		}
	}
	for _, name := range []string{"reins.db", "reins.db-wal"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if i := bytes.Index(data, []byte("tok-visible-nowhere")); i >= 0 {
			ctx := bytes.Trim(data[max(0, i-600):min(len(data), i+200)], "\x00")
			t.Fatalf("%s holds the token in clear: …%q…", name, ctx)
		}
	}
}

// TestMCPLoopbackRefusedByDefault runs a server without an outbound
// allowlist: an agent's MCP server on 127.0.0.1 is a connection failure
// that names the reason and the flag, and the server never sees the
// vault's token.
func TestMCPLoopbackRefusedByDefault(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) { c.OutboundAllow = nil })
	srv := mcptest.Start(t, mcptest.Options{Token: "s3cret-token"})
	sid := s.mcpSession(t, srv, "s3cret-token", "always_allow")
	st := s.openStream(t, sid)
	s.send(t, sid, userMessage("hello"))
	got := st.until(isIdle)
	var msgs []string
	for _, f := range got {
		if f.Type == "session.error" {
			if f.Error.Type != "mcp_connection_failed_error" {
				t.Fatalf("session.error %+v, want mcp_connection_failed_error", f.Error)
			}
			msgs = append(msgs, f.Error.Message)
		}
	}
	if len(msgs) == 0 || !strings.Contains(msgs[0], "127.0.0.1 is a loopback address") || !strings.Contains(msgs[0], "--outbound-allow") {
		t.Fatalf("session errors %q (%v), want the reason and the flag", msgs, types(got))
	}
	if srv.SawToken("s3cret-token") {
		t.Fatal("the refused server saw the vault's token")
	}
}
