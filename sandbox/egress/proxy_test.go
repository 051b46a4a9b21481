package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/reinsdev/reins/sandbox/netguard"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mapResolver answers lookups from a fixed table, standing in for DNS.
type mapResolver map[string][]string

func (r mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ips, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(ips))
	for i, s := range ips {
		out[i] = netip.MustParseAddr(s)
	}
	return out, nil
}

var loopbackOnly = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// startProxy serves p on a loopback listener until the test ends, and
// checks that Serve then returns nil.
func startProxy(t testing.TB, p *Proxy) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

// startEcho serves a TCP echo on loopback until the test ends.
func startEcho(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), accepted
}

// connect sends CONNECT for target through the proxy and returns the
// connection, a reader positioned after the response header, and the
// response.
func connect(t *testing.T, proxy, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, br, resp
}

// body reads a refusal's body.
func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func proxyClient(t *testing.T, proxy string, tlsFrom *httptest.Server) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxy})}
	if tlsFrom != nil {
		tr.TLSClientConfig = tlsFrom.Client().Transport.(*http.Transport).TLSClientConfig
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func TestConnectAllowedLoopback(t *testing.T) {
	echo, _ := startEcho(t)
	p := &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}}
	proxy := startProxy(t, p)

	c, br, resp := connect(t, proxy, echo)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT status %s: %s", resp.Status, body(t, resp))
	}
	io.WriteString(c, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo through tunnel = %q, %v", line, err)
	}

	// HTTPS through CONNECT, as a real client does it.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure") }))
	defer srv.Close()
	r, err := proxyClient(t, proxy, srv).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if b := body(t, r); b != "secure" {
		t.Errorf("HTTPS body %q", b)
	}
	r.Body.Close()
	if s := p.Stats(); s.Allowed != 2 || s.Refused != 0 {
		t.Errorf("Stats = %+v, want 2 allowed", s)
	}
}

func TestPlainHTTPAllowedLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s host=%s", r.Method, r.URL.Path, r.Host)
	}))
	defer srv.Close()
	proxy := startProxy(t, &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}})
	client := proxyClient(t, proxy, nil)
	for range 2 { // the second request may reuse the client connection
		r, err := client.Get(srv.URL + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		want := "GET /hello host=" + strings.TrimPrefix(srv.URL, "http://")
		if b := body(t, r); b != want {
			t.Errorf("body %q, want %q", b, want)
		}
		r.Body.Close()
	}
}

func TestLoopbackRefusedWithoutAllowlist(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	echo, accepted := startEcho(t)
	p := &Proxy{Policy: Policy{Unrestricted: true}, AllowHint: "an operator can allow it with --egress-allow"}
	proxy := startProxy(t, p)

	_, _, resp := connect(t, proxy, echo)
	want := "reins egress proxy: " + echo + " is refused: 127.0.0.1 is a loopback address (an operator can allow it with --egress-allow)\n"
	if b := body(t, resp); resp.StatusCode != 403 || b != want {
		t.Errorf("CONNECT = %s %q, want 403 %q", resp.Status, b, want)
	}

	r, err := proxyClient(t, proxy, nil).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if b := body(t, r); r.StatusCode != 403 || !strings.Contains(b, "127.0.0.1 is a loopback address") {
		t.Errorf("GET = %s %q, want 403 with the reason", r.Status, b)
	}
	r.Body.Close()
	if hits.Load() != 0 || accepted.Load() != 0 {
		t.Errorf("refused servers were reached: http %d, echo %d", hits.Load(), accepted.Load())
	}
	if s := p.Stats(); s.Refused != 2 || s.Allowed != 0 {
		t.Errorf("Stats = %+v, want 2 refused", s)
	}
}

func TestPolicyLimitedAndUnrestricted(t *testing.T) {
	echo, _ := startEcho(t)
	_, port, _ := net.SplitHostPort(echo)
	res := mapResolver{
		"api.example.test":      {"127.0.0.1"},
		"deep.api.example.test": {"127.0.0.1"},
		"example.test":          {"127.0.0.1"},
		"other.test":            {"127.0.0.1"},
	}
	guard := &netguard.Guard{Allow: loopbackOnly, Resolver: res}
	limited := startProxy(t, &Proxy{Policy: Policy{AllowedHosts: []string{"*.example.test", "Other.Test"}}, Guard: guard})
	ipOnly := startProxy(t, &Proxy{Policy: Policy{AllowedHosts: []string{"127.0.0.1"}}, Guard: guard})
	open := startProxy(t, &Proxy{Policy: Policy{Unrestricted: true}, Guard: guard})

	tests := []struct {
		proxy, host string
		want        int
	}{
		{limited, "api.example.test", 200},
		{limited, "deep.api.example.test", 200},
		{limited, "API.Example.Test.", 200},
		{limited, "other.test", 200},
		{limited, "example.test", 403},  // *.domain does not match domain
		{limited, "127.0.0.1", 403},     // an IP literal must be listed itself
		{limited, "unlisted.test", 403}, // refused before any lookup
		{ipOnly, "127.0.0.1", 200},
		{ipOnly, "other.test", 403},
		{open, "other.test", 200},
		{open, "127.0.0.1", 200},
		{open, "unlisted.test", 502}, // permitted, but no such host
	}
	for _, tt := range tests {
		_, _, resp := connect(t, tt.proxy, net.JoinHostPort(tt.host, port))
		if resp.StatusCode != tt.want {
			t.Errorf("CONNECT %s via %s = %s, want %d", tt.host, tt.proxy, resp.Status, tt.want)
		}
	}
	_, _, resp := connect(t, limited, "example.test:"+port)
	want := "reins egress proxy: host example.test is not allowed by this environment's network policy (networking: limited; allowed_hosts: *.example.test, Other.Test)\n"
	if b := body(t, resp); b != want {
		t.Errorf("policy refusal %q, want %q", b, want)
	}
}

func TestForbiddenDestinations(t *testing.T) {
	res := mapResolver{
		"rebind.test":   {"127.0.0.1", "10.0.0.1"}, // the guard allows 127.0.0.1 only
		"metadata.test": {"169.254.169.254"},
		"localhost":     {"127.0.0.1"},
	}
	var logs strings.Builder
	p := &Proxy{
		Policy: Policy{Unrestricted: true},
		Guard:  &netguard.Guard{Allow: loopbackOnly, Resolver: res},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}
	proxy := startProxy(t, p)
	tests := []struct{ target, reason string }{
		{"rebind.test:80", "10.0.0.1 is a private address"},
		{"metadata.test:80", "169.254.169.254 is a link-local address"},
		{"169.254.169.254:80", "169.254.169.254 is a link-local address"},
		{"0x7f000001:80", "non-canonical numeric form of 127.0.0.1"},
		{"2130706433:80", "non-canonical numeric form of 127.0.0.1"},
		{"[::ffff:127.0.0.2]:80", "IPv4-mapped form of 127.0.0.2, a loopback"},
		{"[::1]:80", "::1 is a loopback address"},
		{"metadata.google.internal:80", "metadata service"},
		{"localhost:80", "local machine"},
		{"10.0.0.1:5432", "10.0.0.1 is a private address"},
	}
	for _, tt := range tests {
		_, _, resp := connect(t, proxy, tt.target)
		if b := body(t, resp); resp.StatusCode != 403 || !strings.Contains(b, tt.reason) {
			t.Errorf("CONNECT %s = %s %q, want 403 with %q", tt.target, resp.Status, b, tt.reason)
		}
	}
	// Plain HTTP takes the same path through the guard.
	r, err := proxyClient(t, proxy, nil).Get("http://rebind.test/")
	if err != nil {
		t.Fatal(err)
	}
	if b := body(t, r); r.StatusCode != 403 || !strings.Contains(b, "10.0.0.1 is a private address") {
		t.Errorf("GET http://rebind.test/ = %s %q", r.Status, b)
	}
	r.Body.Close()
	if !strings.Contains(logs.String(), "egress refused") || !strings.Contains(logs.String(), "host=metadata.test") {
		t.Errorf("refusals not logged:\n%s", logs.String())
	}
}

// closedPort returns a loopback address that refuses connections: a
// socket bound to it without listening holds the port until the test
// ends, so that no other test's listener takes it meanwhile.
func closedPort(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
}

func TestUpstreamFailureIs502(t *testing.T) {
	closed := closedPort(t)
	p := &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}}
	proxy := startProxy(t, p)
	_, _, resp := connect(t, proxy, closed)
	if b := body(t, resp); resp.StatusCode != 502 || !strings.Contains(b, "cannot reach "+closed) {
		t.Errorf("CONNECT to a closed port = %s %q", resp.Status, b)
	}
	if p.Stats().Failed != 1 {
		t.Errorf("Stats = %+v", p.Stats())
	}
}

func TestMalformedRequests(t *testing.T) {
	proxy := startProxy(t, &Proxy{Policy: Policy{Unrestricted: true}, MaxHeaderBytes: 1024})
	tests := []struct {
		raw  string
		want int
	}{
		{"GET /relative HTTP/1.1\r\nHost: example.com\r\n\r\n", 400},
		{"GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 400},
		{"CONNECT example.com HTTP/1.1\r\n\r\n", 400},
		{"CONNECT example.com:0 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT example.com:99999 HTTP/1.1\r\n\r\n", 400},
		{"NONSENSE\r\n\r\n", 400},
		{"GET http://0]/ HTTP/1.1\r\n\r\n", 400},
		{"CONNECT [fe80::1%25eth0]:80 HTTP/1.1\r\n\r\n", 400},
		{"GET http://example.com/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431},
	}
	for _, tt := range tests {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tt.raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%q: %v", tt.raw[:min(len(tt.raw), 40)], err)
		} else if resp.StatusCode != tt.want {
			t.Errorf("%q = %s, want %d", tt.raw[:min(len(tt.raw), 40)], resp.Status, tt.want)
		}
		c.Close()
	}
}

func TestHopByHopHeadersStripped(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Seen-Host", r.Host)
		got <- h
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-Resp-End", "kept")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	proxy := startProxy(t, &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}})

	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	fmt.Fprintf(c, "GET %s/ HTTP/1.1\r\nHost: evil.example\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"+
		"Keep-Alive: timeout=5\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"+
		"Te: trailers\r\nUpgrade: websocket\r\nX-End: kept\r\n\r\n", srv.URL)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := <-got
	for _, name := range []string{"X-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Upgrade"} {
		if v := h.Get(name); v != "" {
			t.Errorf("upstream saw %s: %s", name, v)
		}
	}
	if h.Get("X-End") != "kept" {
		t.Errorf("end-to-end header lost: %v", h)
	}
	for _, name := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if v := resp.Header.Get(name); v != "" {
			t.Errorf("client saw %s: %s", name, v)
		}
	}
	if resp.Header.Get("X-Resp-End") != "kept" || body(t, resp) != "ok" {
		t.Errorf("response lost its end-to-end parts: %v", resp.Header)
	}
	if h.Get("X-Seen-Host") != host {
		t.Errorf("upstream saw Host %q, want the URL's %q", h.Get("X-Seen-Host"), host)
	}
}

// TestPlainHTTPBodies sends a request body upstream and streams a chunked
// response back while the upstream is still writing it.
func TestPlainHTTPBodies(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %q\n", b)
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "done\n")
	}))
	defer srv.Close()
	proxy := startProxy(t, &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}})
	r, err := proxyClient(t, proxy, nil).Post(srv.URL, "text/plain", strings.NewReader("payload"))
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	defer r.Body.Close()
	br := bufio.NewReader(r.Body)
	first, err := br.ReadString('\n') // arrives before the upstream finishes
	close(release)
	if err != nil || first != "got \"payload\"\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "done\n" {
		t.Errorf("rest %q", rest)
	}
}
