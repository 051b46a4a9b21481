package executorhub

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
	"github.com/reinsdev/reins/executor"
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
	json.NewEncoder(w).Encode(executor.TokenResponse{
		Type:      "executor_token",
		Token:     h.signer.issue(p, hash, expires),
		ExpiresAt: expires.UTC(),
		URL:       executor.ConnectURL(base),
	})
}

// baseURL is the server's base URL as an executor reaches it: PublicURL,
// else the request's scheme and host. A reverse proxy that terminates
// TLS says so with X-Forwarded-Proto: https (the answer only tells the
// executor that sent it where to connect).
func (h *Hub) baseURL(r *http.Request) string {
	if h.opts.PublicURL != "" {
		return strings.TrimSuffix(strings.TrimRight(h.opts.PublicURL, "/"), "/v1/executor/connect")
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
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
		err = fmt.Errorf("%w: no credentials configured", executor.ErrCredentialRejected)
	case strings.HasPrefix(secret, EnvironmentKeyPrefix):
		p.EnvironmentID, err = h.opts.Credentials.VerifyEnvironmentKey(ctx, hash)
	case strings.HasPrefix(secret, MachineTokenPrefix):
		p.MachineID, err = h.opts.Credentials.VerifyMachineToken(ctx, hash)
	default:
		err = executor.ErrCredentialRejected
	}
	if err == nil && p.EnvironmentID == "" && p.MachineID == "" {
		err = executor.ErrCredentialRejected
	}
	return p, err
}

// credentialOK answers a failed credential check (401 when the credential
// was rejected, 503 when it could not be checked) and reports whether err
// is nil.
func (h *Hub) credentialOK(w http.ResponseWriter, err error) bool {
	switch {
	case errors.Is(err, executor.ErrCredentialRejected):
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
		err = fmt.Errorf("%w: no credentials configured", executor.ErrCredentialRejected)
	case c.EnvironmentID != "":
		var env string
		env, err = h.opts.Credentials.VerifyEnvironmentKey(ctx, c.Credential)
		if err == nil && env != c.EnvironmentID {
			err = executor.ErrCredentialRejected
		}
	default:
		var m string
		m, err = h.opts.Credentials.VerifyMachineToken(ctx, c.Credential)
		if err == nil && m != c.MachineID {
			err = executor.ErrCredentialRejected
		}
	}
	return err
}

// rejection is the message of the token endpoint's 401: the reason the
// Credentials gave, else a generic sentence.
func rejection(err error) string {
	if reason, ok := strings.CutPrefix(err.Error(), executor.ErrCredentialRejected.Error()+": "); ok {
		return "executor credential rejected: " + reason
	}
	return "invalid, revoked or archived executor credential"
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
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{executor.Subprotocol}, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c := &hubConn{h: h, principal: claims.principal, credential: claims.Credential, local: isLocalConn(r.Context()), base: h.baseURL(r), leases: make(map[string]*Lease)}
	c.rpc = executor.NewConn(ws, executor.ConnConfig{
		Handler:        c.handle,
		Inline:         func(m string) bool { return m == executor.MethodToolResult || m == executor.MethodHeartbeat },
		MaxFrame:       h.opts.MaxFrameBytes,
		RequestTimeout: h.opts.RequestTimeout,
		Logger:         h.logger,
	})
	if ws.Subprotocol() != executor.Subprotocol {
		c.rpc.CloseWith(executor.CloseUnsupportedProtocol, "unsupported protocol")
		return
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		c.rpc.CloseWith(executor.CloseDrained, "drained")
		return
	}
	h.conns[c] = true
	h.mu.Unlock()
	expiry := time.AfterFunc(time.Unix(claims.Expires, 0).Sub(h.opts.Now()), func() {
		c.close(executor.CloseTokenExpired, "token expired")
	})
	var pings sync.WaitGroup
	if !c.local { // in memory: nothing to cut
		pings.Go(func() { c.rpc.KeepAlive(h.opts.PingInterval, h.opts.PingTimeout) })
	}
	err = c.rpc.Serve(context.WithoutCancel(r.Context()))
	pings.Wait()
	expiry.Stop()
	h.detach(c, err)
}
