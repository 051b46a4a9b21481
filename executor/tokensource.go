package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Token is an executor token: the credential of one connection.
type Token struct {
	Token     string
	ExpiresAt time.Time
	// URL is the WebSocket URL to connect to.
	URL string
}

// TokenSource gets executor tokens. An error wrapping
// [ErrCredentialRejected] ends the client without retrying.
type TokenSource interface {
	Token(ctx context.Context) (Token, error)
}

// TokenEndpoint is the [TokenSource] that exchanges an environment key or a
// machine token at the token endpoint (POST {URL}/v1/executor/tokens).
type TokenEndpoint struct {
	// URL is the base URL of the reins server, for example
	// "https://reins.example.com".
	URL string
	// Credential is an environment key or a machine token.
	Credential string
	// Executor describes the executor to the server.
	Executor ExecutorInfo
	// HTTPClient sends the request (default http.DefaultClient).
	HTTPClient *http.Client
}

// errorMessage returns ": " and the message of an error envelope, or ""
// if body is not one.
func errorMessage(body []byte) string {
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error.Message == "" {
		return ""
	}
	return ": " + env.Error.Message
}

// Token requests a new executor token. 401 and 403 answers wrap
// [ErrCredentialRejected].
func (t *TokenEndpoint) Token(ctx context.Context) (Token, error) {
	body, _ := json.Marshal(map[string]any{"executor": t.Executor})
	u := strings.TrimRight(t.URL, "/") + "/v1/executor/tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return Token{}, fmt.Errorf("executor: token request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+t.Credential)
	req.Header.Set("Content-Type", "application/json")
	hc := t.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Token{}, fmt.Errorf("executor: token request: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Token{}, fmt.Errorf("%w: token endpoint answered %s%s", ErrCredentialRejected, resp.Status, errorMessage(b))
	case resp.StatusCode != http.StatusOK:
		return Token{}, fmt.Errorf("executor: token endpoint answered %s", resp.Status)
	}
	var tr TokenResponse
	if err := json.Unmarshal(b, &tr); err != nil || tr.Token == "" {
		return Token{}, fmt.Errorf("executor: malformed token response: %v", err)
	}
	if tr.URL == "" {
		tr.URL = ConnectURL(t.URL)
	}
	return Token{Token: tr.Token, ExpiresAt: tr.ExpiresAt, URL: tr.URL}, nil
}

// TokenResponse is the body of a successful answer of the token endpoint
// (POST /v1/executor/tokens).
type TokenResponse struct {
	Type      string    `json:"type"` // "executor_token"
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	// URL is the connect endpoint to dial with the token.
	URL string `json:"url"`
}

// ConnectURL turns a server's base http(s) URL into the WebSocket URL of
// its connect endpoint (…/v1/executor/connect).
func ConnectURL(base string) string {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/v1/executor/connect")
	switch {
	case strings.HasPrefix(base, "https://"):
		base = "wss://" + strings.TrimPrefix(base, "https://")
	case strings.HasPrefix(base, "http://"):
		base = "ws://" + strings.TrimPrefix(base, "http://")
	}
	return base + "/v1/executor/connect"
}
