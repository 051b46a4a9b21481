package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/sandbox/netguard"
)

func TestConcurrencyCap(t *testing.T) {
	echo, _ := startEcho(t)
	p := &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}, MaxConns: 2}
	proxy := startProxy(t, p)
	first, _, r1 := connect(t, proxy, echo)
	_, _, r2 := connect(t, proxy, echo)
	if r1.StatusCode != 200 || r2.StatusCode != 200 {
		t.Fatalf("first two tunnels: %s, %s", r1.Status, r2.Status)
	}
	_, _, r3 := connect(t, proxy, echo)
	if r3.StatusCode != 503 {
		t.Fatalf("third connection = %s, want 503", r3.Status)
	}
	if b := body(t, r3); !strings.Contains(b, "too many connections") {
		t.Errorf("503 body %q", b)
	}
	if p.Stats().Busy != 1 {
		t.Errorf("Stats = %+v, want 1 busy", p.Stats())
	}
	first.Close() // frees a slot once the proxy notices
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, r := connect(t, proxy, echo)
		if r.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot never freed: %s", r.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitClosed reports whether the proxy closes c within d.
func waitClosed(c net.Conn, r io.Reader, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, r)
	if errors.Is(err, net.ErrClosed) || err != nil && strings.Contains(err.Error(), "timeout") {
		return err
	}
	return nil // EOF (or reset): the proxy closed it
}

func TestHeaderTimeout(t *testing.T) {
	proxy := startProxy(t, &Proxy{HeaderTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT exa") // and then nothing
	if err := waitClosed(c, c, 3*time.Second); err != nil {
		t.Errorf("slow header not cut off: %v", err)
	}
}

func TestTunnelIdleTimeout(t *testing.T) {
	echo, _ := startEcho(t)
	p := &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}, IdleTimeout: 300 * time.Millisecond}
	proxy := startProxy(t, p)
	c, br, resp := connect(t, proxy, echo)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// Activity keeps the tunnel open past the idle timeout...
	for range 4 {
		io.WriteString(c, "x")
		if _, err := br.ReadByte(); err != nil {
			t.Fatalf("tunnel closed while active: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// ...and silence closes it.
	if err := waitClosed(c, br, 3*time.Second); err != nil {
		t.Errorf("idle tunnel not closed: %v", err)
	}
}

// TestServeClosesTunnelsOnCancel stops a proxy with a tunnel open: Serve
// must return, the client must see its connection end, and goleak (in
// TestMain) must find nothing left running.
func TestServeClosesTunnelsOnCancel(t *testing.T) {
	echo, _ := startEcho(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Policy: Policy{Unrestricted: true}, Guard: &netguard.Guard{Allow: loopbackOnly}}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Serve(ctx, ln) }()
	c, br, resp := connect(t, ln.Addr().String(), echo)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if err := waitClosed(c, br, time.Second); err != nil {
		t.Errorf("tunnel left open: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("listener still accepting")
	}
}

func TestServeReturnsWhenListenerCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- (&Proxy{}).Serve(context.Background(), ln) }()
	ln.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve = %v, want net.ErrClosed", err)
	}
}

func TestPolicyPermits(t *testing.T) {
	p := Policy{AllowedHosts: []string{"example.com", "*.Example.org", "203.0.113.7", "*.1.2.3"}}
	yes := []string{"example.com", "EXAMPLE.COM", "example.com.", "a.example.org", "a.b.example.org", "203.0.113.7"}
	no := []string{"a.example.com", "example.org", "badexample.org", "example.org.evil", "203.0.113.8", "4.1.2.3", ""}
	for _, h := range yes {
		if !p.Permits(h) {
			t.Errorf("Permits(%q) = false", h)
		}
	}
	for _, h := range no {
		if p.Permits(h) {
			t.Errorf("Permits(%q) = true", h)
		}
	}
	if !(Policy{Unrestricted: true}).Permits("anything.example") {
		t.Error("unrestricted refused a host")
	}
	reg := Policy{AllowedHosts: PackageRegistryHosts()}
	if !reg.Permits("pypi.org") || !reg.Permits("proxy.golang.org") || reg.Permits("github.com") {
		t.Error("PackageRegistryHosts has the wrong hosts")
	}
}

// FuzzParseTarget feeds arbitrary request heads to the parser: whatever
// it accepts must have a host and a valid port, must survive a round
// trip through JoinHostPort, and a limited policy must only pass the
// exact host it lists.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
		"GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"CONNECT [::ffff:127.0.0.1]:80 HTTP/1.1\r\n\r\n",
		"GET http://0x7f000001:8080/ HTTP/1.1\r\n\r\n",
		"GET http://EXAMPLE.com.:80/ HTTP/1.1\r\n\r\n",
	} {
		f.Add(s)
	}
	policy := Policy{AllowedHosts: []string{"example.com"}}
	f.Fuzz(func(t *testing.T, s string) {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(s)))
		if err != nil {
			return
		}
		tg, err := parseTarget(req)
		if err != nil {
			return
		}
		if tg.host == "" || !validPort(tg.port) {
			t.Fatalf("parseTarget(%q) = %+v", s, tg)
		}
		h, p, err := net.SplitHostPort(tg.String())
		if err != nil || h != tg.host || p != tg.port {
			t.Fatalf("target %+v does not round-trip: %q %q %v", tg, h, p, err)
		}
		if policy.Permits(tg.host) && tg.host != "example.com" {
			t.Fatalf("policy for example.com permits %q", tg.host)
		}
	})
}
