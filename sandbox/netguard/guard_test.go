package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mapResolver answers lookups from a fixed table.
type mapResolver map[string][]netip.Addr

func (r mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ips, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return append([]netip.Addr(nil), ips...), nil
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func TestParseAllow(t *testing.T) {
	got, err := ParseAllow([]string{"10.0.0.0/8", " 127.0.0.1 ", "::1", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "::1/128", "fd00::/8"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseAllow = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "10.0.0.1/8", "example.com", "10.0.0.0/33", "fe80::1%eth0"} {
		if _, err := ParseAllow([]string{bad}); err == nil {
			t.Errorf("ParseAllow(%q) succeeded", bad)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("ParseAllow(%q) error %q does not name the entry", bad, err)
		}
	}
	_, err = ParseAllow([]string{"10.0.0.1/8"})
	if !strings.Contains(err.Error(), "did you mean 10.0.0.0/8") {
		t.Errorf("error %q lacks the suggestion", err)
	}
}

func TestResolveRefuses(t *testing.T) {
	g := Guard{Resolver: mapResolver{
		"public.test":  addrs("1.1.1.1"),
		"rebind.test":  addrs("1.1.1.1", "10.0.0.7"),
		"mapped.test":  addrs("::ffff:127.0.0.1"),
		"metadata.zzz": addrs("169.254.169.254"),
		"localhost":    addrs("1.1.1.1"), // refused by name before lookup
	}}
	tests := []struct{ host, reason string }{
		{"127.0.0.1", "127.0.0.1 is a loopback address"},
		{"::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1"},
		{"169.254.169.254", "link-local"},
		{"0x7f000001", "non-canonical numeric form of 127.0.0.1"},
		{"2130706433", "non-canonical numeric form of 127.0.0.1"},
		{"127.1", "non-canonical"},
		{"localhost", "local machine"},
		{"LOCALHOST.", "local machine"},
		{"metadata.google.internal", "metadata"},
		{"rebind.test", "10.0.0.7 is a private address"},
		{"mapped.test", "loopback"},
		{"metadata.zzz", "169.254.169.254 is a link-local address"},
	}
	for _, tt := range tests {
		_, err := g.Resolve(context.Background(), tt.host)
		var d *DeniedError
		if !errors.As(err, &d) {
			t.Errorf("Resolve(%q) = %v, want a *DeniedError", tt.host, err)
			continue
		}
		if !strings.Contains(d.Reason, tt.reason) || d.Host != tt.host {
			t.Errorf("Resolve(%q) = %+v, want host %q and reason containing %q", tt.host, d, tt.host, tt.reason)
		}
	}
	ips, err := g.Resolve(context.Background(), "public.test")
	if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("1.1.1.1") {
		t.Errorf("Resolve(public.test) = %v, %v", ips, err)
	}
	if _, err := g.Resolve(context.Background(), "missing.test"); err == nil || errors.As(err, new(*DeniedError)) {
		t.Errorf("Resolve(missing.test) = %v, want a lookup error", err)
	}
}

func TestAllowOverridesClassification(t *testing.T) {
	g := Guard{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}}
	for _, ok := range []string{"10.1.2.3", "127.0.0.1", "::ffff:127.0.0.1"} {
		if err := g.CheckIP(netip.MustParseAddr(ok)); err != nil {
			t.Errorf("CheckIP(%s) = %v, want allowed", ok, err)
		}
	}
	for _, bad := range []string{"127.0.0.2", "192.168.0.1", "::1"} {
		if err := g.CheckIP(netip.MustParseAddr(bad)); err == nil {
			t.Errorf("CheckIP(%s) allowed", bad)
		}
	}
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

func TestDialContext(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	res := mapResolver{"svc.test": addrs("127.0.0.1")}
	ctx := context.Background()

	strict := Guard{Resolver: res}
	for _, a := range []string{ln.Addr().String(), fmt.Sprintf("svc.test:%d", port), fmt.Sprintf("[::ffff:127.0.0.1]:%d", port)} {
		c, err := strict.DialContext(ctx, "tcp", a)
		var d *DeniedError
		if !errors.As(err, &d) {
			if c != nil {
				c.Close()
			}
			t.Errorf("strict DialContext(%s) = %v, want *DeniedError", a, err)
		}
	}

	open := Guard{Resolver: res, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	for _, a := range []string{ln.Addr().String(), fmt.Sprintf("svc.test:%d", port)} {
		c, err := open.DialContext(ctx, "tcp", a)
		if err != nil {
			t.Errorf("allowlisted DialContext(%s) = %v", a, err)
			continue
		}
		c.Close()
	}
	if _, err := open.DialContext(ctx, "tcp6", ln.Addr().String()); err == nil {
		t.Error("tcp6 dial of an IPv4 address succeeded")
	}
	if _, err := open.DialContext(ctx, "unix", "/tmp/x:1"); err == nil {
		t.Error("unix dial succeeded")
	}
}

// TestControlChecksConnectedAddress exercises the last check on its own:
// it must refuse even when the name-level checks were bypassed.
func TestControlChecksConnectedAddress(t *testing.T) {
	g := Guard{}
	var d *DeniedError
	if err := g.control("tcp4", "127.0.0.1:80", nil); !errors.As(err, &d) {
		t.Errorf("control(127.0.0.1:80) = %v, want *DeniedError", err)
	}
	if err := g.control("tcp6", "[fe80::1%lo]:80", nil); !errors.As(err, &d) {
		t.Errorf("control([fe80::1%%lo]:80) = %v, want *DeniedError", err)
	}
	if err := g.control("tcp4", "1.1.1.1:443", nil); err != nil {
		t.Errorf("control(1.1.1.1:443) = %v", err)
	}
}

// TestTransportRefusesRedirect follows a redirect from a permitted server
// to a forbidden one: the second server must never be reached.
func TestTransportRefusesRedirect(t *testing.T) {
	var hits atomic.Int32
	forbidden := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	forbidden.Listener = ln
	forbidden.Start()
	defer forbidden.Close()
	permitted := httptest.NewServer(http.RedirectHandler(forbidden.URL+"/x", http.StatusFound))
	defer permitted.Close()

	g := Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	tr := g.Transport()
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(permitted.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("redirect to %s followed, status %s", forbidden.URL, resp.Status)
	}
	var d *DeniedError
	if !errors.As(err, &d) || d.IP != netip.MustParseAddr("127.0.0.2") {
		t.Errorf("error %v, want a *DeniedError for 127.0.0.2", err)
	}
	if hits.Load() != 0 {
		t.Errorf("forbidden server hit %d times", hits.Load())
	}
}
