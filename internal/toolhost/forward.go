package toolhost

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/model/gateway"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/turntoken"
	ma "github.com/reinsdev/reins/managedagents"
)

// forwardedHeader marks a call one replica forwarded to another, naming
// the sender: the receiver serves it and never forwards it again.
const forwardedHeader = "Reins-Forwarded-By"

// forwardLookup bounds the lookup of the replica a call goes to.
const forwardLookup = 2 * time.Second

// urlPrefix starts the key a replica announces (replica_hands) with the
// URL the other replicas reach it at. No environment id has this form.
const urlPrefix = "url:"

// ForwarderConfig configures a Forwarder.
type ForwarderConfig struct {
	Tokens *turntoken.Issuer
	Turns  Turns
	Store  ForwardStore
	// Replica names this replica.
	Replica string
	Logger  *slog.Logger
}

// ForwardStore is what a Forwarder reads: a session's lease, and the URL
// its owner announced.
type ForwardStore interface {
	SessionLease(ctx context.Context, sessionID string) (store.Lease, error)
	Announced(ctx context.Context, replica string) ([]string, error)
}

// Forwarder sends the calls of agent-end turns running on other replicas
// there (see turnForwarder).
type Forwarder struct{ f *turnForwarder }

// NewForwarder returns a forwarder with a client of its own.
func NewForwarder(cfg ForwarderConfig) *Forwarder {
	return &Forwarder{&turnForwarder{tokens: cfg.Tokens, h: cfg.Turns, st: cfg.Store, replica: cfg.Replica, log: cfg.Logger,
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}}
}

// Wrap serves the calls of turns running elsewhere by forwarding them, and
// every other request with next.
func (f *Forwarder) Wrap(next http.Handler) http.Handler { return f.f.wrap(next) }

// turnForwarder lets any replica serve the model gateway and the platform
// tools endpoint of agent-end turns: a call whose turn runs on another
// replica (the one its session's lease names) goes to that replica, at
// the URL it announced, which serves it as its own. The tokens are
// stateless (HMAC under the master key every replica shares), so this
// replica checks them before it forwards anything.
type turnForwarder struct {
	tokens  *turntoken.Issuer
	h       Turns
	st      ForwardStore
	replica string
	client  *http.Client
	log     *slog.Logger
}

// wrap serves the calls of turns running elsewhere by forwarding them, and
// every other request with next.
func (f *turnForwarder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := f.owner(r); to != "" {
			f.forward(w, r, to)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// turnCall returns the kind of token a call of an agent-end turn carries,
// "" for any other request.
func turnCall(r *http.Request) turntoken.Kind {
	p := r.URL.Path
	switch {
	case r.Method != http.MethodPost:
		return ""
	case strings.HasPrefix(p, "/v1/gateway/"):
		return turntoken.Model
	case strings.HasPrefix(p, "/v1/sessions/") && strings.HasSuffix(p, "/tool_calls"):
		return turntoken.Tools
	}
	return ""
}

// owner returns the URL of the replica that runs the turn of r, when r is
// a call of an agent-end turn that runs on another replica; "" serves r
// here (which also answers what is wrong with it).
func (f *turnForwarder) owner(r *http.Request) string {
	kind := turnCall(r)
	if kind == "" || r.Header.Get(forwardedHeader) != "" {
		return ""
	}
	c, err := f.tokens.Verify(kind, gateway.Token(r))
	if err != nil {
		return ""
	}
	if _, err := f.h.AgentTurn(c.SessionID, c.TurnID); err == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(r.Context(), forwardLookup)
	defer cancel()
	l, err := f.st.SessionLease(ctx, c.SessionID)
	if err != nil || !l.Live || l.Owner == f.replica {
		return ""
	}
	keys, err := f.st.Announced(ctx, l.Owner)
	if err != nil {
		f.log.Warn("find the replica running a turn", "session", c.SessionID, "replica", l.Owner, "err", err)
		return ""
	}
	for _, k := range keys {
		if u, ok := strings.CutPrefix(k, urlPrefix); ok {
			return u
		}
	}
	return ""
}

// forward sends r to the replica at base and its answer (streamed as it
// comes) back.
func (f *turnForwarder) forward(w http.ResponseWriter, r *http.Request, base string) {
	target, err := url.Parse(base)
	if err != nil {
		f.refuse(w, "the replica running this turn announced a URL that is not one")
		return
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, f.replica)
		},
		Transport:     f.client.Transport,
		FlushInterval: -1, // a gateway stream passes event by event
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f.log.Warn("forward a turn's call to the replica running it", "to", base, "path", r.URL.Path, "err", err)
			f.refuse(w, "the replica running this turn cannot be reached; retry")
		},
	}
	p.ServeHTTP(w, r)
}

// refuse answers a call that could not be forwarded: 502 api_error.
func (f *turnForwarder) refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	json.NewEncoder(w).Encode(ma.ErrorEnvelope{Type: "error", Error: ma.ErrorBody{Type: ma.ErrAPI, Message: msg}})
}

// AdvertiseURL returns the URL the other replicas reach this one at: the
// configured one, else http:// and the listener's address (the host's
// name for an unspecified address).
func AdvertiseURL(configured string, ln net.Listener) string {
	if configured != "" {
		return strings.TrimSuffix(configured, "/")
	}
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		if host, _ = os.Hostname(); host == "" {
			return ""
		}
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
}
