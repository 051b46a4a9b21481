package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// tunnel connects to t and answers 200. If credentials apply to t's
// host and the client starts a TLS handshake, it intercepts the
// connection; otherwise it copies bytes both ways until both sides have
// finished, the connection idles out or the proxy stops.
func (cn *conn) tunnel(t target) {
	creds := cn.p.credentialsFor(t.host)
	if len(creds) > 0 && cn.p.CA == nil {
		cn.p.logger().Error("egress proxy has credentials but no CA", "host", t.host)
		cn.fail(http.StatusInternalServerError, fmt.Sprintf("reins egress proxy: credentials apply to %s but this proxy has no CA to intercept TLS with", t.host))
		return
	}
	up, err := cn.p.dial(cn.ctx, "tcp", t.String())
	if err != nil {
		cn.upstreamError(t, err)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(cn.ctx, func() { up.Close() })
	defer stop()
	cn.p.allowed.Add(1)
	if _, err := io.WriteString(cn.c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if len(creds) > 0 {
		greeting, isTLS := cn.sniff(up)
		if isTLS {
			cn.intercept(t, up, creds)
			return
		}
		if _, err := cn.c.Write(greeting); err != nil {
			return
		}
	}
	cn.splice(up)
}

// splice copies bytes between the client and up until both sides have
// finished.
func (cn *conn) splice(up net.Conn) {
	upA := activeConn{up, cn.touch}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(upA, cn.br, up) // client to upstream, starting with what is buffered
	}()
	pipe(cn.c, upA, cn.raw)
	<-done
}

// pipe copies src to dst. At EOF it half-closes dst so the other side
// sees the end; on any other error it closes whole, ending the other
// direction too.
func pipe(dst io.Writer, src io.Reader, whole net.Conn) {
	_, err := io.Copy(dst, src)
	cw, ok := dst.(interface{ CloseWrite() error })
	if err != nil || !ok {
		whole.Close()
		return
	}
	cw.CloseWrite()
}

// hopHeaders are the hop-by-hop headers a proxy must not forward
// (RFC 9110 §7.6.1), besides those named in Connection and any Proxy-*.
var hopHeaders = []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopHeaders deletes hop-by-hop and Proxy-* headers from h.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
	for name := range h {
		if strings.HasPrefix(name, "Proxy-") {
			delete(h, name)
		}
	}
}

// forward sends a plain HTTP request upstream and streams the response
// back. It reports whether the client connection may carry another
// request.
func (cn *conn) forward(req *http.Request, t target) bool {
	out := req.WithContext(cn.ctx)
	// ReadRequest already takes Host from an absolute URL; clearing it
	// keeps the Host header on the URL the policy checked whatever the
	// caller of forward did.
	out.Host = ""
	out.URL.User = nil
	sub := cn.p.substitution(t.host)
	if sub != nil && !(Policy{AllowedHosts: cn.p.CleartextHosts}).Permits(t.host) {
		msg := fmt.Sprintf("credentials are substituted only over HTTPS, and this is a plain http:// request to %s: use https://", t.host)
		if cn.p.CleartextHint != "" {
			msg += " (" + cn.p.CleartextHint + ")"
		}
		if sub = cn.withhold(sub, out, t, msg); sub == nil {
			return false
		}
	}
	return cn.relay(req, out, t, cn.transport(), sub)
}

// withhold returns sub without its substitutions, for a request out to t
// that may not carry credentials for the reason why. If out holds a
// placeholder in its header or query, it refuses the request instead,
// saying why, and returns nil.
func (cn *conn) withhold(sub *substitution, out *http.Request, t target, why string) *substitution {
	if sub.carries(out) {
		cn.refuse(t, "credentials", "reins egress proxy: "+why)
		return nil
	}
	return sub.withheld()
}

// relay sends out, made from the client's req, upstream through tr with
// sub's substitutions, and streams the response back. It reports whether
// the client connection may carry another request.
func (cn *conn) relay(req, out *http.Request, t target, tr http.RoundTripper, sub *substitution) bool {
	out.RequestURI = ""
	out.Close = false
	removeHopHeaders(out.Header)
	if out.ContentLength != 0 && strings.EqualFold(strings.TrimSpace(out.Header.Get("Expect")), "100-continue") {
		// The proxy sends the body on without waiting for upstream's
		// interim answer, so it lets the client send it now.
		out.Header.Del("Expect")
		if _, err := io.WriteString(cn.c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	if sub != nil && cn.p.MaskResponses {
		// An absent Accept-Encoding would accept any coding.
		out.Header.Set("Accept-Encoding", "identity")
	}
	n, streamed, err := sub.apply(out)
	if err != nil {
		cn.fail(http.StatusBadRequest, "reins egress proxy: "+err.Error())
		return false
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		cn.upstreamError(t, err)
		return false
	}
	defer resp.Body.Close()
	cn.p.allowed.Add(1)
	removeHopHeaders(resp.Header)
	if sub != nil && cn.p.MaskResponses {
		if err := sub.maskResponse(resp, req.Method); err != nil {
			cn.p.failed.Add(1)
			cn.fail(http.StatusBadGateway, fmt.Sprintf("reins egress proxy: %s: %v", t.host, err))
			return false
		}
	}
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	// Response.Write closes a response of unknown length that is not
	// chunked; the connection must then end with it.
	delimitedByClose := resp.ContentLength < 0 && !isChunked(resp.TransferEncoding)
	resp.Close = req.Close || req.ContentLength != 0 || delimitedByClose
	bw := bufio.NewWriter(cn.c)
	resp.Body = flushingBody{resp.Body, bw}
	err = resp.Write(struct{ io.Writer }{bw}) // hides bw.ReadFrom, which would read into the buffer being flushed
	if err == nil {
		err = bw.Flush()
	}
	if streamed != nil {
		n += int(streamed.count.Load())
	}
	cn.logSubstitutions(t, n)
	return err == nil && !resp.Close
}

// flushingBody flushes w before each read of its body, so that what has
// been written reaches the client in few writes, yet before the proxy
// waits for more.
type flushingBody struct {
	io.ReadCloser
	w *bufio.Writer
}

func (f flushingBody) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.ReadCloser.Read(p)
}

func isChunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// transport returns the connection's upstream transport, which dials
// through the guard and leaves bodies as they are.
func (cn *conn) transport() *http.Transport {
	if cn.tr == nil {
		cn.tr = &http.Transport{
			DialContext:           cn.p.dial,
			DisableCompression:    true,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       cn.idleTO,
			ResponseHeaderTimeout: cn.idleTO,
		}
	}
	return cn.tr
}
