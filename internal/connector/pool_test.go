package connector

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/mcptest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// loopback is the operator allowlist of the tests: their MCP servers and
// token endpoints listen on 127.0.0.1.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// guardedClient returns a client of a guard that allows allow, as the
// server builds them.
func guardedClient(t *testing.T, allow []netip.Prefix) *http.Client {
	t.Helper()
	hc := (&netguard.Guard{Allow: allow}).Client(0)
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// vaults is a real SQLite store with one vault and a keyring.
type vaults struct {
	st      *sqlite.Store
	keys    *vault.Keyring
	vaultID string
	hc      *http.Client // calls token endpoints on loopback
}

func newVaults(t *testing.T) *vaults {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key := make([]byte, vault.KeySize)
	rand.Read(key)
	keys, _ := vault.NewKeyring(key)
	v := &vaults{st: st, keys: keys, vaultID: ids.New(ids.Vault), hc: guardedClient(t, loopback)}
	now := ma.Time(time.Now())
	if err := st.CreateVault(context.Background(), ma.Vault{ID: v.vaultID, Type: "vault", Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *vaults) add(t *testing.T, auth ma.CredentialAuth, sec vault.Secrets) store.Credential {
	t.Helper()
	now := ma.Time(time.Now())
	c := store.Credential{Credential: ma.Credential{ID: ids.New(ids.Credential), Type: "vault_credential", VaultID: v.vaultID,
		Metadata: ma.Metadata{}, Auth: auth, CreatedAt: now, UpdatedAt: now}}
	var err error
	if c.Sealed, err = v.keys.SealSecrets(sec, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := v.st.CreateCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func (v *vaults) bearer(t *testing.T, url, token string) {
	v.add(t, ma.CredentialAuth{Type: ma.AuthStaticBearer, MCPServerURL: url}, vault.Secrets{Token: token})
}

func (v *vaults) creds() *VaultCredentials {
	return &VaultCredentials{Store: v.st, Keyring: v.keys, HTTPClient: v.hc}
}

// newPool returns a pool that may connect to loopback unless cfg has a
// client of its own.
func newPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = guardedClient(t, loopback)
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func asError(t *testing.T, err error, kind ErrorKind, server string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want a *connector.Error", err, err)
	}
	if e.Kind != kind || e.ServerName != server {
		t.Fatalf("got %v kind %v server %q, want %v %q", e, e.Kind, e.ServerName, kind, server)
	}
	return e
}

func TestToolsAndCalls(t *testing.T) {
	open := mcptest.Start(t, mcptest.Options{})
	locked := mcptest.Start(t, mcptest.Options{Token: "s3cret"})
	v := newVaults(t)
	v.bearer(t, locked.URL()+"/", "s3cret") // matched although it has a trailing slash
	p := newPool(t, Config{Servers: []Server{{"open", open.URL()}, {"locked", locked.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds()})
	ctx := context.Background()

	tools, err := p.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 6 {
		t.Fatalf("%d tools, want 6: %+v", len(tools), tools)
	}
	seen := map[string]bool{}
	for _, tl := range tools {
		if seen[tl.Name] {
			t.Fatalf("duplicate name %q", tl.Name)
		}
		seen[tl.Name] = true
		got, ok := p.Lookup(tl.Name)
		if !ok || got.Server != tl.Server || got.ToolName != tl.ToolName {
			t.Fatalf("Lookup(%q) = %+v, %v", tl.Name, got, ok)
		}
	}
	echo, ok := p.Lookup("mcp__locked__echo")
	if !ok || !strings.Contains(string(echo.InputSchema), `"text"`) || echo.Description == "" {
		t.Fatalf("mcp__locked__echo = %+v, %v", echo, ok)
	}
	res, err := p.Call(ctx, "locked", "echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].Text != "echo: hi" {
		t.Fatalf("result %+v", res)
	}
	// The connection is reused across calls (one connect per server).
	if _, err := p.Call(ctx, "open", "echo", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Call(ctx, "nope", "echo", nil); err == nil {
		t.Fatal("call to an unknown server succeeded")
	}
	if !locked.SawToken("s3cret") || open.SawToken("s3cret") {
		t.Fatal("the token went to the wrong server")
	}
	p.Close()
	if _, err := p.Tools(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestToolFailureIsAResult(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{})
	p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}})
	res, err := p.Call(context.Background(), "s", "fail", nil)
	if err != nil {
		t.Fatalf("a failing tool is an error: %v", err)
	}
	if !res.IsError || res.Failure == nil || res.Failure.Code != "command_failed" || res.Failure.Retryable {
		t.Fatalf("result %+v failure %+v", res, res.Failure)
	}
	if len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, `"failure"`) {
		t.Fatalf("content %+v", res.Content)
	}
	// An unknown tool is a JSON-RPC error: also a result the model reads.
	res, err = p.Call(context.Background(), "s", "no_such_tool", nil)
	if err != nil || !res.IsError {
		t.Fatalf("unknown tool: %+v, %v", res, err)
	}
}

func TestAuthenticationFailures(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Token: "right"})
	ctx := context.Background()

	t.Run("wrong token", func(t *testing.T) {
		v := newVaults(t)
		v.bearer(t, srv.URL(), "wrong")
		p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds()})
		_, err := p.Tools(ctx)
		e := asError(t, err, AuthenticationFailed, "s")
		if e.Retryable() || !strings.Contains(e.Message, "401") || strings.Contains(e.Error(), "wrong") {
			t.Fatalf("error %q", e.Error())
		}
	})
	t.Run("no credential", func(t *testing.T) {
		p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{newVaults(t).vaultID}, Credentials: newVaults(t).creds()})
		_, err := p.Call(ctx, "s", "echo", nil)
		e := asError(t, err, AuthenticationFailed, "s")
		if !strings.Contains(e.Message, "no credential") {
			t.Fatalf("message %q", e.Message)
		}
	})
	t.Run("expired without refresh", func(t *testing.T) {
		v := newVaults(t)
		past := ma.Time(time.Now().Add(-time.Minute))
		v.add(t, ma.CredentialAuth{Type: ma.AuthMCPOAuth, MCPServerURL: srv.URL(), ExpiresAt: &past}, vault.Secrets{AccessToken: "right"})
		p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds()})
		_, err := p.Tools(ctx)
		e := asError(t, err, AuthenticationFailed, "s")
		if !errors.Is(e, ErrCredentialExpired) {
			t.Fatalf("error %v does not wrap ErrCredentialExpired", e)
		}
	})
}

// tokenEndpoint grants "right" for the refresh token "rt-1" (rotating it
// to "rt-2") and rejects anything else.
func tokenEndpoint(t *testing.T, hits *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		user, pass, _ := r.BasicAuth()
		if r.FormValue("grant_type") != "refresh_token" || r.FormValue("refresh_token") != "rt-1" || user != "cid" || pass != "csecret" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"right","expires_in":3600,"refresh_token":"rt-2"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOAuthRefresh(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Token: "right"})
	ctx := context.Background()
	refresh := func(endpoint string) *ma.OAuthRefresh {
		return &ma.OAuthRefresh{ClientID: "cid", TokenEndpoint: endpoint, TokenEndpointAuth: ma.TokenEndpointAuth{Type: "client_secret_basic"}}
	}
	for _, tt := range []struct {
		name    string
		expires time.Duration // relative to now
	}{
		{"expired token", -time.Minute},
		{"token rejected before expiry", time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hits atomic.Int64
			te := tokenEndpoint(t, &hits)
			v := newVaults(t)
			exp := ma.Time(time.Now().Add(tt.expires))
			c := v.add(t, ma.CredentialAuth{Type: ma.AuthMCPOAuth, MCPServerURL: srv.URL(), ExpiresAt: &exp, Refresh: refresh(te.URL)},
				vault.Secrets{AccessToken: "stale", RefreshToken: "rt-1", ClientSecret: "csecret"})
			p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds()})
			if _, err := p.Tools(ctx); err != nil {
				t.Fatal(err)
			}
			if hits.Load() != 1 {
				t.Fatalf("%d refreshes, want 1", hits.Load())
			}
			got, _ := v.st.GetCredential(ctx, v.vaultID, c.ID)
			sec, err := v.keys.OpenSecrets(got.Sealed, c.ID)
			if err != nil || sec.AccessToken != "right" || sec.RefreshToken != "rt-2" || sec.ClientSecret != "csecret" {
				t.Fatalf("stored secrets after refresh: %+v, %v", sec, err)
			}
			if got.Auth.ExpiresAt == nil || *got.Auth.ExpiresAt <= exp && tt.expires < 0 {
				t.Fatalf("expires_at not advanced: %v", got.Auth.ExpiresAt)
			}
			// The refreshed token is used from now on: no second refresh.
			if _, err := p.Call(ctx, "s", "echo", json.RawMessage(`{"text":"x"}`)); err != nil || hits.Load() != 1 {
				t.Fatalf("call after refresh: %v, %d refreshes", err, hits.Load())
			}
		})
	}
	t.Run("refresh fails", func(t *testing.T) {
		var hits atomic.Int64
		te := tokenEndpoint(t, &hits)
		v := newVaults(t)
		exp := ma.Time(time.Now().Add(-time.Minute))
		v.add(t, ma.CredentialAuth{Type: ma.AuthMCPOAuth, MCPServerURL: srv.URL(), ExpiresAt: &exp, Refresh: refresh(te.URL)},
			vault.Secrets{AccessToken: "stale-at-0x1", RefreshToken: "revoked-rt-0x2", ClientSecret: "csecret-0x3"})
		var logs strings.Builder
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		creds := v.creds()
		creds.Logger = log
		p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: creds, Logger: log})
		_, err := p.Tools(ctx)
		e := asError(t, err, AuthenticationFailed, "s")
		if !strings.Contains(logs.String(), "refresh failed") {
			t.Fatalf("the failed refresh was not logged: %s", logs.String())
		}
		for _, sec := range []string{"stale-at-0x1", "revoked-rt-0x2", "csecret-0x3"} {
			if strings.Contains(logs.String(), sec) || strings.Contains(e.Error(), sec) {
				t.Fatalf("secret %q in the log or the error:\n%s\n%v", sec, logs.String(), e)
			}
		}
		var re *RefreshError
		if !errors.As(e, &re) || re.Response == nil || re.Response.StatusCode != 400 {
			t.Fatalf("error %v does not carry the token endpoint's answer", e)
		}
	})
}

func TestConnectionFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("unreachable", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		p := newPool(t, Config{Servers: []Server{{"gone", "http://" + addr + "/mcp"}}})
		e := asError(t, func() error { _, err := p.Tools(ctx); return err }(), ConnectionFailed, "gone")
		if !e.Retryable() {
			t.Fatal("a connection failure is not retryable")
		}
	})
	t.Run("5xx", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{Status: http.StatusServiceUnavailable})
		p := newPool(t, Config{Servers: []Server{{"busy", srv.URL()}}})
		_, err := p.Tools(ctx)
		if e := asError(t, err, ConnectionFailed, "busy"); !strings.Contains(e.Message, "503") {
			t.Fatalf("message %q", e.Message)
		}
	})
	t.Run("hung", func(t *testing.T) {
		// Accepts connections and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		p := newPool(t, Config{Servers: []Server{{"hung", "http://" + ln.Addr().String() + "/mcp"}}, ConnectTimeout: 200 * time.Millisecond})
		start := time.Now()
		_, err = p.Tools(ctx)
		asError(t, err, ConnectionFailed, "hung")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("connect took %v with a 200ms timeout", d)
		}
	})
}

func TestReconnectAfterRestart(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{})
	p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}})
	ctx := context.Background()
	if _, err := p.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err := p.Call(ctx, "s", "echo", json.RawMessage(`{"text":"a"}`))
	asError(t, err, ConnectionFailed, "s")

	srv.Restart()
	// Between turns: the next listing reconnects.
	if _, err := p.Tools(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	// A restart that the pool has not noticed. When the new server
	// answers the old session id with 404, the call provably did not run
	// and is sent again on a new session. When the request died on a
	// connection the old server closed, it may have run: the call fails
	// as ConnectionFailed (the turn is retried) and the next one
	// reconnects.
	srv.Restart()
	res, err := p.Call(ctx, "s", "echo", json.RawMessage(`{"text":"b"}`))
	if err != nil {
		asError(t, err, ConnectionFailed, "s")
		res, err = p.Call(ctx, "s", "echo", json.RawMessage(`{"text":"b"}`))
	}
	if err != nil || res.Content[0].Text != "echo: b" {
		t.Fatalf("call across a restart: %+v, %v", res, err)
	}
}

func TestSessionMissingIsResent(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{})
	p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}})
	ctx := context.Background()
	if _, err := p.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	// The server forgets the session (as after a restart) but the TCP
	// connection stays up: the 404 proves the call did not run.
	srv.ForgetSessions()
	calls := srv.Calls.Load()
	res, err := p.Call(ctx, "s", "echo", json.RawMessage(`{"text":"c"}`))
	if err != nil || res.Content[0].Text != "echo: c" {
		t.Fatalf("call after the session was forgotten: %+v, %v", res, err)
	}
	if n := srv.Calls.Load() - calls; n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

func TestCancelInFlightCall(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{})
	p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Call(ctx, "s", "wait", nil)
		done <- err
	}()
	select {
	case <-srv.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("the tool did not start")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not end the call")
	}
	// The server was told to cancel.
	deadline := time.Now().Add(5 * time.Second)
	for srv.Cancelled.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server's tool was not cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The connection is still usable.
	if res, err := p.Call(context.Background(), "s", "echo", json.RawMessage(`{"text":"ok"}`)); err != nil || res.IsError {
		t.Fatalf("after cancel: %+v, %v", res, err)
	}
}

func TestCallTimeoutIsAResult(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{})
	p := newPool(t, Config{Servers: []Server{{"s", srv.URL()}}, CallTimeout: 200 * time.Millisecond})
	res, err := p.Call(context.Background(), "s", "wait", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].Text, "did not answer") {
		t.Fatalf("timed-out call: %+v, %v", res, err)
	}
}

func TestSSEFallback(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{SSE: true, Token: "tok"})
	v := newVaults(t)
	v.bearer(t, srv.URL(), "tok")
	p := newPool(t, Config{Servers: []Server{{"legacy", srv.URL()}}, VaultIDs: []string{v.vaultID}, Credentials: v.creds()})
	tools, err := p.Tools(context.Background())
	if err != nil || len(tools) != 3 {
		t.Fatalf("SSE server tools: %v, %v", tools, err)
	}
	res, err := p.Call(context.Background(), "legacy", "echo", json.RawMessage(`{"text":"old"}`))
	if err != nil || res.Content[0].Text != "echo: old" {
		t.Fatalf("SSE call: %+v, %v", res, err)
	}
}

func TestNewPoolValidates(t *testing.T) {
	for _, servers := range [][]Server{
		{{"", "http://x"}},
		{{"a", "http://x"}, {"a", "http://y"}},
		{{"a", "ftp://x"}},
	} {
		if _, err := NewPool(Config{Servers: servers}); err == nil {
			t.Errorf("NewPool(%v) accepted", servers)
		}
	}
}
