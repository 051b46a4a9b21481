package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ServeHTTP routes POST …/executor/tokens to the token endpoint and
// GET …/executor/connect to the connect endpoint.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/executor/tokens"):
		h.serveToken(w, r)
	case strings.HasSuffix(r.URL.Path, "/executor/connect"):
		h.serveConnect(w, r)
	default:
		httpError(w, http.StatusNotFound, "not_found_error", "no such endpoint")
	}
}

// TokenHandler returns the handler of POST /v1/executor/tokens.
func (h *Hub) TokenHandler() http.Handler { return http.HandlerFunc(h.serveToken) }

// ConnectHandler returns the handler of GET /v1/executor/connect.
func (h *Hub) ConnectHandler() http.Handler { return http.HandlerFunc(h.serveConnect) }

func httpError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

func bearer(r *http.Request) string {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}

// tokenResponse is the body of a successful token request.
type tokenResponse struct {
	Type      string    `json:"type"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	URL       string    `json:"url"`
}

func (h *Hub) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "invalid_request_error", "use POST")
		return
	}
	secret := bearer(r)
	hash := HashSecret(secret)
	p, err := h.verifyCredential(r.Context(), secret, hash)
	if !h.credentialOK(w, err) {
		return
	}
	expires := h.opts.Now().Add(h.opts.TokenTTL)
	base := h.baseURL(r)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(tokenResponse{
		Type:      "executor_token",
		Token:     h.signer.issue(p, hash, expires),
		ExpiresAt: expires.UTC(),
		URL:       connectURL(base),
	})
}

// baseURL is the server's base URL as an executor reaches it: PublicURL,
// else the request's scheme and host.
func (h *Hub) baseURL(r *http.Request) string {
	if h.opts.PublicURL != "" {
		return strings.TrimSuffix(strings.TrimRight(h.opts.PublicURL, "/"), "/v1/executor/connect")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// verifyCredential asks the Credentials who secret (an environment key or
// a machine token, whose hash is hash) speaks for.
func (h *Hub) verifyCredential(ctx context.Context, secret, hash string) (principal, error) {
	var p principal
	var err error
	switch {
	case h.opts.Credentials == nil:
		err = fmt.Errorf("%w: no credentials configured", ErrCredentialRejected)
	case strings.HasPrefix(secret, EnvironmentKeyPrefix):
		p.EnvironmentID, err = h.opts.Credentials.VerifyEnvironmentKey(ctx, hash)
	case strings.HasPrefix(secret, MachineTokenPrefix):
		p.MachineID, err = h.opts.Credentials.VerifyMachineToken(ctx, hash)
	default:
		err = ErrCredentialRejected
	}
	if err == nil && p.EnvironmentID == "" && p.MachineID == "" {
		err = ErrCredentialRejected
	}
	return p, err
}

// credentialOK answers a failed credential check (401 when the credential
// was rejected, 503 when it could not be checked) and reports whether err
// is nil.
func (h *Hub) credentialOK(w http.ResponseWriter, err error) bool {
	switch {
	case errors.Is(err, ErrCredentialRejected):
		httpError(w, http.StatusUnauthorized, "authentication_error", rejection(err))
		return false
	case err != nil:
		h.logger.Warn("executor credential check failed", "err", err)
		httpError(w, http.StatusServiceUnavailable, "overloaded_error", "credential check unavailable; retry")
		return false
	}
	return true
}

// recheck verifies again the credential an executor token was exchanged
// for, so that a token outlives neither its environment key's revocation
// nor its environment's archival. In-process executors' tokens name no
// credential.
func (h *Hub) recheck(ctx context.Context, c tokenClaims) error {
	if c.Credential == "" {
		return nil
	}
	var err error
	switch {
	case h.opts.Credentials == nil:
		err = fmt.Errorf("%w: no credentials configured", ErrCredentialRejected)
	case c.EnvironmentID != "":
		var env string
		env, err = h.opts.Credentials.VerifyEnvironmentKey(ctx, c.Credential)
		if err == nil && env != c.EnvironmentID {
			err = ErrCredentialRejected
		}
	default:
		var m string
		m, err = h.opts.Credentials.VerifyMachineToken(ctx, c.Credential)
		if err == nil && m != c.MachineID {
			err = ErrCredentialRejected
		}
	}
	return err
}

// rejection is the message of the token endpoint's 401: the reason the
// Credentials gave, else a generic sentence.
func rejection(err error) string {
	if reason, ok := strings.CutPrefix(err.Error(), ErrCredentialRejected.Error()+": "); ok {
		return "executor credential rejected: " + reason
	}
	return "invalid, revoked or archived executor credential"
}

// connectURL turns a base http(s) URL into the WebSocket connect URL.
func connectURL(base string) string {
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

func (h *Hub) serveConnect(w http.ResponseWriter, r *http.Request) {
	claims, err := h.signer.verify(bearer(r), h.opts.Now())
	if err != nil {
		httpError(w, http.StatusUnauthorized, "authentication_error", err.Error())
		return
	}
	if !h.credentialOK(w, h.recheck(r.Context(), claims)) {
		return
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		httpError(w, http.StatusServiceUnavailable, "overloaded_error", "the hub is shutting down")
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c := &hubConn{h: h, principal: claims.principal, credential: claims.Credential, local: isLocalConn(r.Context()), base: h.baseURL(r), leases: make(map[string]*Lease)}
	c.rpc = newRPCConn(ws, connConfig{
		handler:        c.handle,
		inline:         func(m string) bool { return m == MethodToolResult || m == MethodHeartbeat },
		maxFrame:       h.opts.MaxFrameBytes,
		requestTimeout: h.opts.RequestTimeout,
		logger:         h.logger,
	})
	if ws.Subprotocol() != Subprotocol {
		c.rpc.closeWith(CloseUnsupportedProtocol, "unsupported protocol")
		return
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		c.rpc.closeWith(CloseDrained, "drained")
		return
	}
	h.conns[c] = true
	h.mu.Unlock()
	expiry := time.AfterFunc(time.Unix(claims.Expires, 0).Sub(h.opts.Now()), func() {
		c.close(CloseTokenExpired, "token expired")
	})
	var pings sync.WaitGroup
	if !c.local { // in memory: nothing to cut
		pings.Go(func() { c.rpc.keepAlive(h.opts.PingInterval, h.opts.PingTimeout) })
	}
	err = c.rpc.serve(context.WithoutCancel(r.Context()))
	pings.Wait()
	expiry.Stop()
	h.detach(c, err)
}
