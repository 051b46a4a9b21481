package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/reinsdev/reins/sandbox/netguard"
)

// conn is one client connection.
type conn struct {
	p      *Proxy
	ctx    context.Context // cancelled when the connection ends or idles out
	raw    net.Conn
	c      net.Conn // raw, touching the idle timer on every byte moved
	lr     *io.LimitedReader
	br     *bufio.Reader
	idle   *time.Timer
	tr     *http.Transport // created on the first plain HTTP request
	idleTO time.Duration
}

func newConn(ctx context.Context, cancel context.CancelFunc, p *Proxy, raw net.Conn) *conn {
	cn := &conn{p: p, ctx: ctx, raw: raw, idleTO: or(p.IdleTimeout, DefaultIdleTimeout)}
	cn.idle = time.AfterFunc(cn.idleTO, cancel)
	cn.c = activeConn{raw, cn.touch}
	cn.lr = &io.LimitedReader{R: cn.c, N: math.MaxInt64}
	cn.br = bufio.NewReader(cn.lr)
	return cn
}

// rebase makes c, which carries the rest of the client connection (a
// TLS connection over it), the connection requests are read from and
// answers written to.
func (cn *conn) rebase(c net.Conn) {
	cn.raw, cn.c = c, c
	cn.lr = &io.LimitedReader{R: c, N: math.MaxInt64}
	cn.br = bufio.NewReader(cn.lr)
}

// touch postpones the idle timeout.
func (cn *conn) touch() { cn.idle.Reset(cn.idleTO) }

func (cn *conn) serve() {
	defer cn.idle.Stop()
	defer func() {
		if cn.tr != nil {
			cn.tr.CloseIdleConnections()
		}
	}()
	for {
		req, ok := cn.readRequest()
		if !ok {
			return
		}
		t, err := parseTarget(req)
		if err != nil {
			cn.fail(http.StatusBadRequest, "reins egress proxy: "+err.Error())
			return
		}
		if !cn.admit(t) {
			return
		}
		if req.Method == http.MethodConnect {
			cn.tunnel(t)
			return
		}
		if !cn.forward(req, t) {
			return
		}
	}
}

// readRequest reads the next request's header within the header limits.
// It answers a malformed or oversized header itself and reports false
// when the connection should close.
func (cn *conn) readRequest() (*http.Request, bool) {
	maxHeader := or(cn.p.MaxHeaderBytes, DefaultMaxHeaderBytes)
	cn.raw.SetReadDeadline(time.Now().Add(or(cn.p.HeaderTimeout, DefaultHeaderTimeout)))
	cn.lr.N = int64(maxHeader) + int64(cn.br.Size()) // the reader may fetch one buffer ahead
	req, err := http.ReadRequest(cn.br)
	exhausted := cn.lr.N == 0
	cn.lr.N = math.MaxInt64
	cn.raw.SetReadDeadline(time.Time{})
	switch {
	case err == nil:
		cn.touch()
		return req, true
	case exhausted:
		cn.fail(http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("reins egress proxy: request header larger than %d bytes", maxHeader))
	case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed), cn.ctx.Err() != nil:
		// The client left, was too slow, or the proxy is shutting down.
	default:
		cn.fail(http.StatusBadRequest, "reins egress proxy: malformed request: "+err.Error())
	}
	return nil, false
}

// target is the host and port a request asks the proxy to reach.
type target struct {
	host string // lower case, without brackets or a trailing dot
	port string
}

func (t target) String() string { return net.JoinHostPort(t.host, t.port) }

// parseTarget extracts the destination of a CONNECT or absolute-form
// http:// request.
func parseTarget(req *http.Request) (target, error) {
	u := req.URL
	var t target
	switch {
	case req.Method == http.MethodConnect:
		if u.Host == "" || u.Path != "" || u.Port() == "" {
			return t, fmt.Errorf("CONNECT needs host:port, got %q", req.RequestURI)
		}
		t = target{host: u.Hostname(), port: u.Port()}
	case u.Scheme == "http" && u.Host != "":
		t = target{host: u.Hostname(), port: u.Port()}
		if t.port == "" {
			t.port = "80"
		}
	default:
		return t, fmt.Errorf("only CONNECT and absolute-form http:// requests are proxied, got %s %q", req.Method, req.RequestURI)
	}
	t.host = normalizeHost(t.host)
	if !validHost(t.host) {
		return t, fmt.Errorf("invalid host in %q", req.RequestURI)
	}
	if !validPort(t.port) {
		return t, fmt.Errorf("invalid port in %q", req.RequestURI)
	}
	return t, nil
}

// validHost reports whether h is an IP literal without a zone or a name
// made of letters, digits, '-', '_' and '.'.
func validHost(h string) bool {
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Zone() == ""
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range []byte(h) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func validPort(s string) bool {
	if len(s) == 0 || len(s) > 5 {
		return false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

// admit applies the policy to t's host name, answering 403 if it refuses.
func (cn *conn) admit(t target) bool {
	if cn.p.Policy.Permits(t.host) {
		return true
	}
	msg := fmt.Sprintf("reins egress proxy: host %s is not allowed by this environment's network policy (networking: limited; allowed_hosts: %s)",
		t.host, summarize(cn.p.Policy.AllowedHosts))
	cn.refuse(t, "policy", msg)
	return false
}

// summarize lists hosts for a message, eliding a long list.
func summarize(hosts []string) string {
	const max = 12
	switch {
	case len(hosts) == 0:
		return "none"
	case len(hosts) > max:
		return fmt.Sprintf("%s and %d more", strings.Join(hosts[:max], ", "), len(hosts)-max)
	}
	return strings.Join(hosts, ", ")
}

// upstreamError answers an error from dialling or forwarding to t: 403
// if the guard refused the address, else 502, saying so when t's
// certificate failed verification. The message describes the failure in
// the proxy's words (see upstreamProblem): an upstream's bytes, which may
// echo a substituted credential, never reach the client or the log.
func (cn *conn) upstreamError(t target, err error) {
	var d *netguard.DeniedError
	var v *tls.CertificateVerificationError
	switch {
	case errors.As(err, &v):
		cn.p.failed.Add(1)
		cn.fail(http.StatusBadGateway, fmt.Sprintf("reins egress proxy: the certificate of %s is not trusted: %s", t.host, certProblem(v.Err)))
	case errors.As(err, &d):
		msg := fmt.Sprintf("reins egress proxy: %s is refused: %s", t, d.Reason)
		if d.IP.IsValid() && cn.p.AllowHint != "" {
			msg += " (" + cn.p.AllowHint + ")"
		}
		cn.refuse(t, "address", msg)
	default:
		cn.p.failed.Add(1)
		cn.fail(http.StatusBadGateway, fmt.Sprintf("reins egress proxy: cannot reach %s: %s", t, upstreamProblem(err)))
	}
}

func (cn *conn) refuse(t target, kind, msg string) {
	cn.p.refused.Add(1)
	cn.p.logger().Info("egress refused", "host", t.host, "port", t.port, "by", kind, "reason", msg)
	cn.fail(http.StatusForbidden, msg)
}

// fail answers code with msg and closes the connection.
func (cn *conn) fail(code int, msg string) {
	reply(cn.c, code, msg)
	lingerClose(cn.raw)
}

// activeConn calls touch whenever bytes move through it.
type activeConn struct {
	net.Conn
	touch func()
}

func (a activeConn) Read(b []byte) (int, error) {
	n, err := a.Conn.Read(b)
	if n > 0 {
		a.touch()
	}
	return n, err
}

func (a activeConn) Write(b []byte) (int, error) {
	n, err := a.Conn.Write(b)
	if n > 0 {
		a.touch()
	}
	return n, err
}

// CloseWrite half-closes the connection if it supports that.
func (a activeConn) CloseWrite() error {
	if cw, ok := a.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
