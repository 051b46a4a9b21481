package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// tlsHandshakeRecord is the first byte a TLS client sends.
const tlsHandshakeRecord = 0x16

// sniff waits for whichever side of a new tunnel speaks first. It
// reports whether the client did, starting a TLS handshake; if upstream
// did, it returns what upstream sent, for the tunnel to pass on first.
func (cn *conn) sniff(up net.Conn) (greeting []byte, isTLS bool) {
	type read struct {
		b   []byte
		err error
	}
	fromUp := make(chan read, 1)
	go func() {
		b := make([]byte, 4<<10)
		n, err := up.Read(b)
		fromUp <- read{b[:n], err}
	}()
	fromClient := make(chan []byte, 1)
	go func() {
		b, _ := cn.br.Peek(1)
		fromClient <- b
	}()
	select {
	case first := <-fromClient:
		up.SetReadDeadline(time.Unix(1, 0)) // ends the upstream read
		r := <-fromUp
		up.SetReadDeadline(time.Time{})
		return r.b, len(r.b) == 0 && len(first) == 1 && first[0] == tlsHandshakeRecord
	case r := <-fromUp:
		cn.raw.SetReadDeadline(time.Unix(1, 0)) // ends the client peek
		<-fromClient
		cn.raw.SetReadDeadline(time.Time{})
		return r.b, false
	}
}

// intercept completes the client's TLS handshake with a certificate for
// t's host and relays the HTTP/1.1 requests inside to t over TLS, with
// creds substituted. up is a connection to t already dialled, used for
// the first request.
func (cn *conn) intercept(t target, up net.Conn, creds []Credential) {
	leaf, err := cn.p.CA.leaf(t.host)
	if err != nil {
		cn.p.logger().Error("egress interception", "host", t.host, "err", err)
		return
	}
	tc := tls.Server(bufferedConn{cn.c, cn.br}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(cn.ctx, or(cn.p.HeaderTimeout, DefaultHeaderTimeout))
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		cn.p.logger().Debug("egress interception: client handshake failed", "host", t.host, "err", err)
		return
	}
	cn.rebase(tc)
	tr := cn.upstreamTransport(t, up)
	defer tr.CloseIdleConnections()
	sub := newSubstitution(creds, or(cn.p.MaxBufferedBody, DefaultMaxBufferedBody))
	for {
		req, ok := cn.readRequest()
		if !ok {
			return
		}
		if req.Method == http.MethodConnect {
			cn.fail(http.StatusBadRequest, "reins egress proxy: CONNECT inside an intercepted TLS connection")
			return
		}
		out := req.WithContext(cn.ctx)
		// Whatever the request line says, the request goes to t, keeping
		// the Host header the client chose; credentials go only with a
		// Host that names t's host, not to another site behind it.
		out.URL.Scheme, out.URL.Host, out.URL.User = "https", t.String(), nil
		use := sub
		if h := hostName(req.Host); h != "" && h != t.host {
			why := fmt.Sprintf("credentials for %s are substituted only in requests whose Host header names %s; this one names %s", t.host, t.host, h)
			if use = cn.withhold(sub, out, t, why); use == nil {
				return
			}
		}
		if !cn.relay(req, out, t, tr, use) {
			return
		}
	}
}

// hostName returns the host of a Host header value, without its port, as
// target holds hosts.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return normalizeHost(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

// upstreamTransport returns a transport that sends requests to t over
// TLS, verified against the proxy's UpstreamRoots. Its first connection
// is over first; it dials others through the guard.
func (cn *conn) upstreamTransport(t target, first net.Conn) *http.Transport {
	cfg := &tls.Config{
		ServerName: t.host,
		RootCAs:    cn.p.UpstreamRoots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	}
	var mu sync.Mutex // guards first
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		mu.Lock()
		c := first
		first = nil
		mu.Unlock()
		if c == nil {
			var err error
			if c, err = cn.p.dial(ctx, "tcp", t.String()); err != nil {
				return nil, err
			}
		}
		ctx, cancel := context.WithTimeout(ctx, or(cn.p.DialTimeout, DefaultDialTimeout))
		defer cancel()
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
	return &http.Transport{
		DialTLSContext:        dial,
		DisableCompression:    true,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       cn.idleTO,
		ResponseHeaderTimeout: cn.idleTO,
	}
}

// bufferedConn is a net.Conn whose reads come through a bufio.Reader
// that may already hold some of its bytes.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
