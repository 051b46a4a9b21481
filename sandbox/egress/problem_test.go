package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// serveRaw accepts connections on ln and answers each by echoing what
// it reads, until the test ends.
func serveRaw(t *testing.T, ln net.Listener) string {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestUpstreamErrorsQuoteNothing: when the credential's host answers
// with something the proxy cannot use (an echo of the request, over
// plain TCP or inside TLS, or a certificate for names of its choosing),
// the proxy's 502 describes the failure without quoting the upstream:
// neither the substituted value nor anything else it sent.
func TestUpstreamErrorsQuoteNothing(t *testing.T) {
	w := newWorld(t)
	w.resolver["api.test"] = []string{"127.0.0.1"}
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plainPort := serveRaw(t, plainLn)
	leaf, err := w.public.leaf("api.test")
	if err != nil {
		t.Fatal(err)
	}
	tlsLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*leaf}})
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := serveRaw(t, tlsLn)
	wrongName := w.serveNamed(t, "api.test", "upstream-chosen-words.test", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	_, wrongPort, _ := net.SplitHostPort(strings.TrimPrefix(wrongName, "https://"))

	tests := []struct{ url, want string }{
		{"http://api.test:" + plainPort + "/echo-marker", "cannot reach api.test:" + plainPort + ": its answer is not HTTP"},
		{"https://api.test:" + tlsPort + "/echo-marker", "cannot reach api.test:" + tlsPort + ": its answer is not HTTP"},
		{"https://api.test:" + wrongPort + "/echo-marker", "the certificate of api.test is not trusted: it is not valid for this host name"},
	}
	p := w.proxy(nil)
	p.CleartextHosts = []string{"api.test"}
	p.MaskResponses = true
	c := w.client(t, startProxy(t, p))
	for _, tt := range tests {
		req, _ := http.NewRequest("GET", tt.url+"?key="+placeholderA, nil)
		req.Header.Set("Authorization", "Bearer "+placeholderA)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := body(t, resp)
		resp.Body.Close()
		if resp.StatusCode != 502 || b != "reins egress proxy: "+tt.want+"\n" {
			t.Errorf("%s: %s %q, want 502 %q", tt.url, resp.Status, b, tt.want)
		}
		for _, upstream := range []string{valueA, "echo-marker", "GET", "upstream-chosen-words", "x509"} {
			if strings.Contains(b, upstream) {
				t.Errorf("%s: the proxy's message quotes %q: %q", tt.url, upstream, b)
			}
		}
	}
}
