package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/mcptest"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/mcp"
)

// TestAgentUsesAReinsMCPModuleServer: a remote MCP server built with
// reins's own module (direct mode); an operation's failure envelope reaches
// the model as an error tool result.
func TestAgentUsesAReinsMCPModuleServer(t *testing.T) {
	srv := mcp.NewServer(mcp.Options{Name: "inventory", Mode: mcp.Direct})
	if err := srv.Add(
		mcp.Operation{Name: "count", Description: "Count items", InputSchema: json.RawMessage(`{"type":"object","properties":{"item":{"type":"string"}}}`),
			Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ Item string }
				json.Unmarshal(c.Arguments, &in)
				return mcp.StructuredResult(map[string]any{"item": in.Item, "count": 42}), nil
			}},
		mcp.Operation{Name: "reserve", Description: "Reserve an item",
			Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
				return nil, mcp.NewFailure(mcp.CodeBusy, "all reservation slots are taken", nil)
			}},
	); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcp.HTTPOptions{}))
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	url := "http://" + ln.Addr().String() + "/mcp"

	s := start(t, options{})
	var a ma.Agent
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{"name": "inv", "model": "scripted",
		"mcp_servers": []any{map[string]any{"type": "url", "name": "inv", "url": url}},
		"tools":       []any{map[string]any{"type": "mcp_toolset", "mcp_server_name": "inv", "default_config": map[string]any{"permission_policy": map[string]any{"type": "always_allow"}}}},
	}, &a); err != nil {
		t.Fatal(err)
	}
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool mcp__inv__count {"item":"bolts"}`+"\n"+`@tool mcp__inv__reserve {}`))
	got := st.until(isIdle)
	var results []frame
	for _, f := range got {
		if f.Type == "agent.mcp_tool_result" {
			results = append(results, f)
		}
	}
	if len(results) != 2 {
		t.Fatalf("%d results: %v", len(results), types(got))
	}
	if results[0].IsError != nil && *results[0].IsError || !strings.Contains(results[0].Content[0].Text, "42") {
		t.Fatalf("count: %+v", results[0])
	}
	if results[1].IsError == nil || !*results[1].IsError || !strings.Contains(results[1].Content[0].Text, `"code":"busy"`) {
		t.Fatalf("reserve: %+v", results[1])
	}
	if got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("turn ended with %+v", got[len(got)-1].StopReason)
	}
}

// TestOAuthCredentialRefreshedOnExpiry: an expired mcp_oauth access token
// is refreshed through the token endpoint before the MCP call.
func TestOAuthCredentialRefreshedOnExpiry(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Token: "fresh-access"})
	refreshes := 0
	tokenEndpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("refresh_token") != "the-refresh-token" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		refreshes++
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"fresh-access","token_type":"bearer","expires_in":3600}`))
	}))
	t.Cleanup(tokenEndpoint.Close)

	s := start(t, options{})
	var v struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]any{"display_name": "oauth"}, &v); err != nil {
		t.Fatal(err)
	}
	var cred struct {
		ID   string
		Auth struct {
			ExpiresAt *string `json:"expires_at"`
		}
	}
	if _, err := call(s.url, s.key, "POST", "/v1/vaults/"+v.ID+"/credentials", map[string]any{"auth": map[string]any{
		"type": "mcp_oauth", "mcp_server_url": srv.URL(), "access_token": "stale-access", "expires_at": ma.Time(time.Now().Add(10 * time.Second)), // within the refresh margin
		"refresh": map[string]any{"client_id": "reins", "refresh_token": "the-refresh-token", "token_endpoint": tokenEndpoint.URL,
			"token_endpoint_auth": map[string]any{"type": "none"}}}}, &cred); err != nil {
		t.Fatal(err)
	}
	var a ma.Agent
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{"name": "oauth", "model": "scripted",
		"mcp_servers": []any{map[string]any{"type": "url", "name": "tools", "url": srv.URL()}},
		"tools":       []any{map[string]any{"type": "mcp_toolset", "mcp_server_name": "tools", "default_config": map[string]any{"permission_policy": map[string]any{"type": "always_allow"}}}},
	}, &a); err != nil {
		t.Fatal(err)
	}
	var sess ma.Session
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": s.newEnv(t, "env").ID, "vault_ids": []string{v.ID}}, &sess); err != nil {
		t.Fatal(err)
	}
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool mcp__tools__echo {"text":"refreshed"}`))
	got := st.until(isIdle)
	ok := false
	for _, f := range got {
		if f.Type == "session.error" {
			t.Fatalf("session error %+v", f.Error)
		}
		ok = ok || (f.Type == "agent.mcp_tool_result" && strings.Contains(f.Content[0].Text, "refreshed"))
	}
	if !ok || refreshes != 1 || srv.SawToken("stale-access") || !srv.SawToken("fresh-access") {
		t.Fatalf("result %v, %d refreshes", ok, refreshes)
	}
	if _, err := call(s.url, s.key, "GET", "/v1/vaults/"+v.ID+"/credentials/"+cred.ID, nil, &cred); err != nil || cred.Auth.ExpiresAt == nil || *cred.Auth.ExpiresAt <= ma.Time(time.Now().Add(time.Hour-time.Minute)) {
		t.Fatalf("credential after refresh: %+v %v", cred.Auth, err)
	}
}

// TestEnvironmentVariableCredentialInjected: a cloud session's tools see
// a placeholder for its environment_variable credential (the egress
// proxy substitutes the value; TestCredentialSubstitutedAtEgress); the
// value is nowhere in the sandbox nor in the events.
func TestEnvironmentVariableCredentialInjected(t *testing.T) {
	s := start(t, options{})
	var v struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]any{"display_name": "env"}, &v); err != nil {
		t.Fatal(err)
	}
	const value = "sv-4f1e2d3c-injected"
	if _, err := call(s.url, s.key, "POST", "/v1/vaults/"+v.ID+"/credentials", map[string]any{"auth": map[string]any{
		"type": "environment_variable", "secret_name": "MY_TOKEN", "secret_value": value,
		"networking": map[string]any{"type": "unrestricted"}}}, nil); err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted", toolset(false))
	var sess ma.Session
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": a.ID, "environment_id": s.newEnv(t, "cloud").ID, "vault_ids": []string{v.ID}}, &sess); err != nil {
		t.Fatal(err)
	}
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"printf %s \"$MY_TOKEN\" | wc -c; echo \"$MY_TOKEN\""}`))
	got := st.until(isIdle)
	var out string
	for _, f := range got {
		if f.Type == "agent.tool_result" {
			out = f.Content[0].Text
		}
	}
	if !strings.Contains(out, "50\nreins_placeholder_") || strings.Contains(out, value) {
		t.Fatalf("tool output %q", out)
	}
	var raw json.RawMessage
	if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sess.ID+"/events?limit=1000", nil, &raw); err != nil || strings.Contains(string(raw), value) {
		t.Fatalf("the secret reached the event log (%v)", err)
	}
}
