package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reinsdev/reins/sandbox/netguard"
)

// Default limits, used where a Proxy field is zero.
const (
	DefaultMaxConns       = 256
	DefaultMaxHeaderBytes = 64 << 10
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultDialTimeout    = 30 * time.Second
)

// A Proxy is an HTTP forward proxy for one sandbox. It tunnels CONNECT
// requests and forwards absolute-form http:// requests to the hosts its
// Policy permits, dialling only through its Guard.
//
// Where Credentials apply to a host, the proxy replaces their
// placeholders by their values in the requests to that host, over TLS
// only. A CONNECT to such a host it intercepts if the client starts a
// TLS handshake: it completes the handshake itself with a certificate
// from its CA, reads the HTTP/1.1 requests inside, and sends each on to
// the host over a new TLS connection that it verifies against
// UpstreamRoots; it substitutes in those whose Host names the host it
// connected to. Any other CONNECT is tunnelled untouched. Plain http://
// requests get no substitution unless their host is in CleartextHosts.
// A request that carries a placeholder in its header or query where it
// may not be substituted is refused (403), so that the client learns
// why, rather than sent with the placeholder.
//
// The proxy's own error messages never quote what an upstream sent: they
// describe the failure in the proxy's words.
//
// A Proxy must not be copied or modified once serving; it is safe for
// concurrent use.
type Proxy struct {
	Policy Policy
	// Guard refuses internal addresses; nil means a zero netguard.Guard.
	Guard *netguard.Guard
	// Logger receives refusals at Info and the number of substitutions
	// made for each request at Debug (never a value); nil discards them.
	Logger *slog.Logger
	// AllowHint, if set, follows a refusal of an address in parentheses,
	// e.g. "an operator can allow it with --egress-allow".
	AllowHint string

	// MaxConns caps the client connections served at once; beyond it a
	// connection is answered 503. Zero means DefaultMaxConns.
	MaxConns int
	// MaxHeaderBytes caps the size of a request's header.
	MaxHeaderBytes int
	// HeaderTimeout bounds the wait for a request's header, including the
	// wait for the next request on a kept-alive connection.
	HeaderTimeout time.Duration
	// IdleTimeout closes a connection (and its tunnel or upstream request)
	// when no byte has moved in either direction for this long.
	IdleTimeout time.Duration
	// DialTimeout bounds the connection to an upstream host, and the TLS
	// handshake with it on an intercepted connection.
	DialTimeout time.Duration

	// Credentials are substituted at egress; see Credential.
	Credentials []Credential
	// CredentialSource, if set, is called for each request instead of
	// reading Credentials, so that credentials may change (a rotated
	// token) while the proxy serves. It must be safe for concurrent use.
	CredentialSource func() []Credential
	// CA mints the certificates for intercepted connections. It is
	// needed when Credentials is not empty: without it a CONNECT to a
	// host that has credentials is answered 500.
	CA *CA
	// UpstreamRoots verify the hosts of intercepted connections; nil
	// means the system's roots.
	UpstreamRoots *x509.CertPool
	// MaxBufferedBody is the largest request body, with a known length,
	// in which placeholders are replaced in memory so that the request
	// keeps an exact Content-Length. Larger bodies, and those of unknown
	// length, are replaced as they stream and sent chunked. Zero means
	// DefaultMaxBufferedBody.
	MaxBufferedBody int
	// MaskResponses replaces credential values with their placeholders in
	// the responses of hosts credentials apply to (status text, header
	// names and values, bodies and trailers), so that a server echoing a
	// request does not hand the value to the sandbox. Such requests ask
	// for identity bodies (Accept-Encoding: identity); a body that comes
	// in gzip or deflate all the same is decoded as it streams and sent
	// on without a content coding, and one in any other coding is
	// refused (502).
	MaskResponses bool
	// CleartextHosts are hosts, matched as Policy.AllowedHosts are, to
	// which credentials are substituted in plain http:// requests too,
	// the values then crossing the network in clear. Empty means none.
	CleartextHosts []string
	// CleartextHint, if set, follows the refusal of a placeholder in a
	// plain http:// request, e.g. "an operator can allow it with
	// --egress-cleartext-credentials".
	CleartextHint string

	active                         atomic.Int64
	allowed, refused, failed, busy atomic.Uint64
}

// Stats counts what a Proxy has done since it was created.
type Stats struct {
	Allowed uint64 // tunnels established and requests answered upstream
	Refused uint64 // refused by the policy or the guard (403)
	Failed  uint64 // upstream failures (502)
	Busy    uint64 // connections turned away by MaxConns (503)
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{Allowed: p.allowed.Load(), Refused: p.refused.Load(), Failed: p.failed.Load(), Busy: p.busy.Load()}
}

// Serve accepts connections on ln and serves them until ctx is done or ln
// fails. When ctx is done it closes ln. Before returning it closes every
// connection it accepted or opened and waits for their goroutines. It
// returns nil if ctx ended it, or else the error from Accept.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel, below
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if retryable(err) {
				sleep(ctx, 50*time.Millisecond)
				continue
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.handle(ctx, c)
		}()
	}
}

// retryable reports whether an Accept error is a momentary shortage.
func retryable(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// handle serves one client connection, or turns it away when the proxy
// is at MaxConns.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	if p.active.Add(1) > int64(or(p.MaxConns, DefaultMaxConns)) {
		p.active.Add(-1)
		p.busy.Add(1)
		c.SetDeadline(time.Now().Add(time.Second))
		reply(c, 503, "reins egress proxy: too many connections; retry shortly")
		lingerClose(c)
		return
	}
	defer p.active.Add(-1)
	newConn(ctx, cancel, p, c).serve()
}

// reply writes a complete text/plain response that closes the connection.
func reply(w io.Writer, code int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// lingerClose half-closes c and discards what the client still sends for
// a moment, so that closing a socket with unread data does not reset the
// connection before the client has read our reply.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	c.Close()
}

func (p *Proxy) guard() *netguard.Guard {
	if p.Guard == nil {
		return &netguard.Guard{}
	}
	return p.Guard
}

func (p *Proxy) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// dial connects to an upstream address through the guard.
func (p *Proxy) dial(ctx context.Context, network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, or(p.DialTimeout, DefaultDialTimeout))
	defer cancel()
	return p.guard().DialContext(ctx, network, address)
}

// or returns v, or def if v is zero or negative.
func or[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
