package egress

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/sandbox/netguard"
)

const (
	placeholderA = "REINS_PLACEHOLDER_aaaaaaaaaaaaaaaa"
	valueA       = "sk-real-secret-A"
	placeholderB = "REINS_PLACEHOLDER_bbbbbbbbbbbbbbbb"
	valueB       = "sk-real-secret-B"
)

// testCredentials are A for api.test, in headers and bodies, and B for
// other.test, in headers only.
func testCredentials() []Credential {
	return []Credential{
		{Placeholder: placeholderA, Value: valueA, Hosts: []string{"api.test"}, Header: true, Body: true},
		{Placeholder: placeholderB, Value: valueB, Hosts: []string{"*.other.test", "other.test"}, Header: true},
	}
}

// world is a set of HTTPS servers on loopback, known by name through a
// resolver, with certificates from their own "public" CA, and a proxy
// with its own CA for interception.
type world struct {
	public, proxyCA *CA
	roots           *x509.CertPool // trusts public only
	resolver        mapResolver
	ports           map[string]string // host → port of its server
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{public: mustCA(t, "test public CA"), proxyCA: mustCA(t, "reins test egress CA"),
		roots: x509.NewCertPool(), resolver: mapResolver{}, ports: map[string]string{}}
	w.roots.AppendCertsFromPEM(w.public.CertPEM())
	return w
}

func mustCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// serve starts an HTTPS server for host with a certificate from the
// public CA and returns its URL.
func (w *world) serve(t testing.TB, host string, h http.Handler) string {
	t.Helper()
	return w.serveNamed(t, host, host, h)
}

// serveNamed is serve with a certificate for certName.
func (w *world) serveNamed(t testing.TB, host, certName string, h http.Handler) string {
	t.Helper()
	leaf, err := w.public.leaf(certName)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the proxy refuses
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	w.resolver[host] = []string{"127.0.0.1"}
	w.ports[host] = port
	return "https://" + net.JoinHostPort(host, port)
}

// proxy returns a proxy for the world, with the test credentials.
func (w *world) proxy(logger *slog.Logger) *Proxy {
	return &Proxy{
		Policy:        Policy{Unrestricted: true},
		Guard:         &netguard.Guard{Allow: loopbackOnly, Resolver: w.resolver},
		Logger:        logger,
		Credentials:   testCredentials(),
		CA:            w.proxyCA,
		UpstreamRoots: w.roots,
	}
}

// client returns a client of the proxy that trusts both CAs.
func (w *world) client(t testing.TB, proxy string) *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(w.public.CertPEM())
	roots.AppendCertsFromPEM(w.proxyCA.CertPEM())
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// recorder answers every request with a description of it.
func recorder() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c, _ := r.Cookie("session")
		cookie := ""
		if c != nil {
			cookie = c.Value
		}
		fmt.Fprintf(w, "auth=%s custom=%s cookie=%s query=%s body=%s",
			r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), cookie, r.URL.RawQuery, b)
	})
}

// send posts a request carrying placeholder everywhere it may be
// substituted, and returns the server's description and the response.
func send(t *testing.T, c *http.Client, base, placeholder string) (string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/x?key="+placeholder, strings.NewReader(`{"token":"`+placeholder+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+placeholder)
	req.Header.Set("X-Api-Key", placeholder)
	req.Header.Set("Cookie", "session="+placeholder)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return body(t, resp), resp
}

// describe is what recorder answers to send(p) when the server sees p
// everywhere.
func describe(p string) string {
	return fmt.Sprintf(`auth=Bearer %s custom=%s cookie=%s query=key=%s body={"token":"%s"}`, p, p, p, p, p)
}

func TestInterceptSubstitutes(t *testing.T) {
	w := newWorld(t)
	api := w.serve(t, "api.test", recorder())
	other := w.serve(t, "other.test", recorder())
	var logs bytes.Buffer
	p := w.proxy(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	// The proxy logs after answering: read the logs once it has stopped
	// (cleanups run last registered first).
	t.Cleanup(func() {
		if l := logs.String(); !strings.Contains(l, "host=api.test") || !strings.Contains(l, "count=5") ||
			strings.Contains(l, valueA) || strings.Contains(l, valueB) {
			t.Errorf("substitution logs:\n%s", l)
		}
	})
	c := w.client(t, startProxy(t, p))

	got, resp := send(t, c, api, placeholderA)
	if want := describe(valueA); got != want {
		t.Errorf("api.test received\n%s\nwant\n%s", got, want)
	}
	if iss := resp.TLS.PeerCertificates[0].Issuer.CommonName; iss != "reins test egress CA" {
		t.Errorf("api.test was not intercepted: certificate issued by %q", iss)
	}
	// A credential for another host is not substituted; B, substituted
	// on other.test, only in headers.
	if got, _ := send(t, c, other, placeholderA); got != describe(placeholderA) {
		t.Errorf("other.test received A's value: %s", got)
	}
	want := fmt.Sprintf(`auth=Bearer %s custom=%s cookie=%s query=key=%s body={"token":"%s"}`, valueB, valueB, valueB, valueB, placeholderB)
	if got, _ := send(t, c, other, placeholderB); got != want {
		t.Errorf("other.test received\n%s\nwant\n%s", got, want)
	}
}

func TestInterceptKeepsAlive(t *testing.T) {
	w := newWorld(t)
	api := w.serve(t, "api.test", recorder())
	c := w.client(t, startProxy(t, w.proxy(nil)))
	var reused []bool
	for range 3 {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", api+"/?k="+placeholderA, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := body(t, resp); !strings.Contains(b, "query=k="+valueA) {
			t.Errorf("response %q", b)
		}
		resp.Body.Close()
	}
	if fmt.Sprint(reused) != "[false true true]" {
		t.Errorf("connection reused: %v", reused)
	}
}

func TestHostWithoutCredentialsIsTunnelled(t *testing.T) {
	w := newWorld(t)
	plain := w.serve(t, "plain.test", recorder())
	c := w.client(t, startProxy(t, w.proxy(nil)))
	got, resp := send(t, c, plain, placeholderA)
	if got != describe(placeholderA) {
		t.Errorf("plain.test received %s", got)
	}
	if iss := resp.TLS.PeerCertificates[0].Issuer.CommonName; iss != "test public CA" {
		t.Errorf("plain.test was intercepted: certificate issued by %q", iss)
	}
}

// TestNonTLSTunnelToCredentialHost speaks protocols other than TLS to a
// host with credentials, one where the server talks first and one where
// the client does: the proxy must tunnel both untouched.
func TestNonTLSTunnelToCredentialHost(t *testing.T) {
	for _, serverFirst := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			if serverFirst {
				io.WriteString(c, "220 banner\r\n")
			}
			io.Copy(c, c)
		}()
		t.Cleanup(func() { ln.Close(); <-done })
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		w := newWorld(t)
		w.resolver["api.test"] = []string{"127.0.0.1"}
		c, br, resp := connect(t, startProxy(t, w.proxy(nil)), "api.test:"+port)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if serverFirst {
			line, err := br.ReadString('\n')
			if err != nil || line != "220 banner\r\n" {
				t.Fatalf("banner %q, %v", line, err)
			}
		}
		io.WriteString(c, "SSH-2.0-client "+placeholderA+"\r\n")
		if line, err := br.ReadString('\n'); err != nil || line != "SSH-2.0-client "+placeholderA+"\r\n" {
			t.Errorf("server first %v: echo %q, %v", serverFirst, line, err)
		}
	}
}

// TestCleartextCredentials: a plain http:// request to a credential's
// host that carries a placeholder in its header or query is refused,
// saying why, and never reaches the host; one without is forwarded
// unsubstituted (a body placeholder goes as it is); hosts named in
// CleartextHosts get the substitution.
func TestCleartextCredentials(t *testing.T) {
	hits := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		d := describeRequest(r)
		hits <- d
		io.WriteString(rw, d)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	w := newWorld(t)
	w.resolver["api.test"] = []string{"127.0.0.1"}
	w.resolver["plain.test"] = []string{"127.0.0.1"}
	p := w.proxy(nil)
	p.CleartextHint = "ask the operator"
	c := w.client(t, startProxy(t, p))
	api := "http://api.test:" + port
	for _, where := range []string{"header", "query"} {
		req, _ := http.NewRequest("GET", api+"/", nil)
		if where == "header" {
			req.SetBasicAuth("x", placeholderA)
		} else {
			req.URL.RawQuery = "key=" + placeholderA
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		want := "reins egress proxy: credentials are substituted only over HTTPS, and this is a plain http:// request to api.test: use https:// (ask the operator)\n"
		if b := body(t, resp); resp.StatusCode != 403 || b != want {
			t.Errorf("placeholder in the %s: %s %q, want 403 %q", where, resp.Status, b, want)
		}
		resp.Body.Close()
	}
	if len(hits) != 0 {
		t.Fatalf("the refused requests reached the host: %q", <-hits)
	}
	resp, err := c.Post(api+"/", "text/plain", strings.NewReader(placeholderA))
	if err != nil {
		t.Fatal(err)
	}
	if b := body(t, resp); resp.StatusCode != 200 || b != "auth= custom= cookie= query= body="+placeholderA {
		t.Errorf("request without a placeholder in its header: %s %q", resp.Status, b)
	}
	resp.Body.Close()
	<-hits
	if got, _ := send(t, c, "http://plain.test:"+port, placeholderA); got != describe(placeholderA) {
		t.Errorf("plain.test received %s", got)
	}
	<-hits

	p = w.proxy(nil)
	p.CleartextHosts = []string{"*.test"}
	c = w.client(t, startProxy(t, p))
	if got, _ := send(t, c, api, placeholderA); got != describe(valueA) {
		t.Errorf("api.test, allowed in cleartext, received %s", got)
	}
}

// TestInterceptOtherHost: inside TLS intercepted for api.test, a request
// whose Host names another site is not given the credential: refused if
// it carries a placeholder, else forwarded as it is. A Host that names
// api.test in another form gets it.
func TestInterceptOtherHost(t *testing.T) {
	w := newWorld(t)
	hits := make(chan string, 10)
	api := w.serve(t, "api.test", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		hits <- r.Host + " " + r.Header.Get("Authorization")
	}))
	c := w.client(t, startProxy(t, w.proxy(nil)))
	do := func(host, auth string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", api+"/", nil)
		req.Host = host
		req.Header.Set("Authorization", auth)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp, body(t, resp)
	}
	resp, b := do("other.example", "Bearer "+placeholderA)
	want := "reins egress proxy: credentials for api.test are substituted only in requests whose Host header names api.test; this one names other.example\n"
	if resp.StatusCode != 403 || b != want {
		t.Errorf("Host other.example with a placeholder: %s %q, want 403 %q", resp.Status, b, want)
	}
	if len(hits) != 0 {
		t.Fatalf("the refused request reached the host: %q", <-hits)
	}
	if resp, _ := do("other.example", "Bearer none"); resp.StatusCode != 200 || <-hits != "other.example Bearer none" {
		t.Errorf("Host other.example without a placeholder: %s", resp.Status)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(api, "https://"))
	for _, host := range []string{"API.test.", "api.test:" + port} {
		if resp, _ := do(host, "Bearer "+placeholderA); resp.StatusCode != 200 || <-hits != host+" Bearer "+valueA {
			t.Errorf("Host %s: %s", host, resp.Status)
		}
	}
}

func TestBasicAuthAndQueryEscaping(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		fmt.Fprintf(w, "%s:%s %s", user, pass, r.URL.Query().Get("key"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	w := newWorld(t)
	w.resolver["api.test"] = []string{"127.0.0.1"}
	p := w.proxy(nil)
	p.CleartextHosts = []string{"api.test"}
	p.Credentials[0].Value = "a&b=c d"
	c := w.client(t, startProxy(t, p))
	req, _ := http.NewRequest("GET", "http://api.test:"+port+"/?key="+placeholderA, nil)
	req.SetBasicAuth("x-token", placeholderA)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); got != "x-token:a&b=c d a&b=c d" {
		t.Errorf("server saw %q", got)
	}
	resp.Body.Close()
}

// splitReader returns its chunks one read at a time.
type splitReader struct{ chunks []string }

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0])
	s.chunks[0] = s.chunks[0][n:]
	if s.chunks[0] == "" {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

func TestReplacer(t *testing.T) {
	creds := []Credential{
		{Placeholder: "PH_LONG_1", Value: "v1"},
		{Placeholder: "PH_", Value: "short"},
		{Placeholder: "XY", Value: "a much longer value"},
	}
	tests := []struct {
		chunks []string
		want   string
	}{
		{[]string{"no placeholder at all"}, "no placeholder at all"},
		{[]string{"a PH_LONG_1 b"}, "a v1 b"},
		{[]string{"a PH_LO", "NG_1 b"}, "a v1 b"},
		{[]string{"P", "H", "_", "L", "O", "N", "G", "_", "1"}, "v1"},
		{[]string{"PH_LONG_2"}, "shortLONG_2"},
		{[]string{"PH_LONG_", "2 PH_"}, "shortLONG_2 short"},
		{[]string{"XYXYX", "Y"}, strings.Repeat("a much longer value", 3)},
		{[]string{strings.Repeat("z", replacerChunk-4) + "PH_LO", "NG_1" + strings.Repeat("z", replacerChunk)},
			strings.Repeat("z", replacerChunk-4) + "v1" + strings.Repeat("z", replacerChunk)},
		{[]string{"ends with a partial PH_LONG"}, "ends with a partial shortLONG"},
		{[]string{"ends with X"}, "ends with X"},
	}
	for _, tt := range tests {
		r := newReplacer(&splitReader{append([]string(nil), tt.chunks...)}, creds)
		got, err := io.ReadAll(r)
		if err != nil || string(got) != tt.want {
			t.Errorf("replace %.80q = %.80q, %v; want %.80q", tt.chunks, got, err, tt.want)
		}
	}
}

// TestStreamedBodySplitPlaceholder sends a chunked body whose
// placeholder arrives in two writes, and a body larger than
// MaxBufferedBody: both are streamed and substituted.
func TestStreamedBodySplitPlaceholder(t *testing.T) {
	w := newWorld(t)
	got := make(chan string, 2)
	api := w.serve(t, "api.test", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%d %s", r.ContentLength, b)
	}))
	p := w.proxy(nil)
	p.MaxBufferedBody = 16
	c := w.client(t, startProxy(t, p))

	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, "start "+placeholderA[:10])
		time.Sleep(50 * time.Millisecond) // let the proxy read the first half alone
		io.WriteString(pw, placeholderA[10:]+" end")
		pw.Close()
	}()
	resp, err := c.Post(api, "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if g := <-got; g != "-1 start "+valueA+" end" {
		t.Errorf("chunked body arrived as %q", g)
	}

	resp, err = c.Post(api, "text/plain", strings.NewReader("a long body with "+placeholderA))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if g := <-got; g != "-1 a long body with "+valueA {
		t.Errorf("large body arrived as %q", g)
	}
}

// TestBufferedBodyKeepsLength checks that a small body keeps an exact
// Content-Length after a substitution that changes its length.
func TestBufferedBodyKeepsLength(t *testing.T) {
	w := newWorld(t)
	got := make(chan string, 1)
	api := w.serve(t, "api.test", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%d %v %s", r.ContentLength, r.TransferEncoding, b)
	}))
	c := w.client(t, startProxy(t, w.proxy(nil)))
	resp, err := c.Post(api, "text/plain", strings.NewReader("x"+placeholderA+"x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if g, want := <-got, fmt.Sprintf("%d [] x%sx", len(valueA)+2, valueA); g != want {
		t.Errorf("server saw %q, want %q", g, want)
	}
}

func TestInterceptUntrustedUpstream(t *testing.T) {
	srv := httptest.NewTLSServer(recorder()) // its own certificate, for 127.0.0.1
	defer srv.Close()
	w := newWorld(t)
	p := w.proxy(nil)
	p.Credentials = []Credential{{Placeholder: placeholderA, Value: valueA, Hosts: []string{"127.0.0.1"}, Header: true}}
	c := w.client(t, startProxy(t, p))
	resp, err := c.Get(srv.URL + "/?k=" + placeholderA)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := "reins egress proxy: the certificate of 127.0.0.1 is not trusted: it is signed by an unknown authority"
	if b := body(t, resp); resp.StatusCode != 502 || !strings.HasPrefix(b, want) {
		t.Errorf("got %s %q, want 502 %q", resp.Status, b, want)
	}

	// Trusting the server's certificate makes it work.
	p = w.proxy(nil)
	p.Credentials = []Credential{{Placeholder: placeholderA, Value: valueA, Hosts: []string{"127.0.0.1"}, Header: true}}
	p.UpstreamRoots = x509.NewCertPool()
	p.UpstreamRoots.AddCert(srv.Certificate())
	resp, err = w.client(t, startProxy(t, p)).Get(srv.URL + "/?k=" + placeholderA)
	if err != nil {
		t.Fatal(err)
	}
	if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, "query=k="+valueA) {
		t.Errorf("trusted upstream: %s %q", resp.Status, b)
	}
	resp.Body.Close()
}

func TestNoCA(t *testing.T) {
	w := newWorld(t)
	api := w.serve(t, "api.test", recorder())
	p := w.proxy(nil)
	p.CA = nil
	_, _, resp := connect(t, startProxy(t, p), strings.TrimPrefix(api, "https://"))
	if b := body(t, resp); resp.StatusCode != 500 || !strings.Contains(b, "no CA") {
		t.Errorf("CONNECT without a CA = %s %q", resp.Status, b)
	}
}

func TestLeafCache(t *testing.T) {
	ca := mustCA(t, "cache test")
	a1, err := ca.leaf("a.test")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := ca.leaf("a.test")
	b, _ := ca.leaf("b.test")
	if a1 != a2 || a1 == b {
		t.Errorf("leaf cache: a %p %p, b %p", a1, a2, b)
	}
	if time.Until(a1.Leaf.NotAfter) > leafValidity || a1.Leaf.DNSNames[0] != "a.test" {
		t.Errorf("leaf for a.test: %v %v", a1.Leaf.NotAfter, a1.Leaf.DNSNames)
	}
	for i := range leafCacheSize {
		ca.leaf(fmt.Sprintf("h%d.test", i))
	}
	if a3, _ := ca.leaf("a.test"); a3 == a1 || len(ca.leaves) != leafCacheSize || ca.lru.Len() != leafCacheSize {
		t.Errorf("cache not bounded: %d entries, a.test kept: %v", len(ca.leaves), a3 == a1)
	}

	// Through the proxy: two connections see the same certificate.
	w := newWorld(t)
	api := w.serve(t, "api.test", recorder())
	proxy := startProxy(t, w.proxy(nil))
	var serials []string
	for range 2 {
		_, resp := send(t, w.client(t, proxy), api, placeholderA)
		serials = append(serials, resp.TLS.PeerCertificates[0].SerialNumber.String())
	}
	if serials[0] != serials[1] {
		t.Errorf("serials %v", serials)
	}
}

func TestLoadCA(t *testing.T) {
	ca := mustCA(t, "persisted")
	key, err := ca.MarshalKey()
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadCA(ca.CertPEM(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := back.leaf("api.test")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: roots}); err != nil {
		t.Errorf("leaf from the loaded CA: %v", err)
	}
	other, _ := mustCA(t, "other").MarshalKey()
	if _, err := LoadCA(ca.CertPEM(), other); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("LoadCA with another key = %v", err)
	}
	if _, err := LoadCA([]byte("junk"), key); err == nil {
		t.Error("LoadCA accepted junk")
	}
}

// TestCurl runs curl through the proxy, trusting the proxy's CA.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	w := newWorld(t)
	api := w.serve(t, "api.test", recorder())
	proxy := startProxy(t, w.proxy(nil))
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, w.proxyCA.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), curl, "-sS", "--fail-with-body", "--max-time", "10",
		"--proxy", "http://"+proxy, "--noproxy", "", "--cacert", caFile,
		"-H", "Authorization: Bearer "+placeholderA, "-H", "X-Api-Key: "+placeholderA, "-b", "session="+placeholderA,
		"--data-binary", `{"token":"`+placeholderA+`"}`, api+"/v1/x?key="+placeholderA)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if want := describe(valueA); string(out) != want {
		t.Errorf("curl got\n%s\nwant\n%s", out, want)
	}
}

// BenchmarkHTTPS compares a GET through an intercepted connection with
// one through a plain tunnel, both over kept-alive connections.
//
// bench/sandbox can measure the same from inside a sandbox: start a
// Proxy with a CA and one Credential for a local HTTPS server's name,
// and time `curl --cacert ca.pem -H "Authorization: Bearer <placeholder>"`
// runs (or a keep-alive loop in the sandbox) against that name and
// against a name without credentials.
func BenchmarkHTTPS(b *testing.B) {
	w := newWorld(b)
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") })
	for _, host := range []string{"api.test", "plain.test"} {
		url := w.serve(b, host, handler)
		proxy := startProxy(b, w.proxy(nil))
		c := w.client(b, proxy)
		name := map[string]string{"api.test": "intercepted", "plain.test": "tunnelled"}[host]
		b.Run(name, func(b *testing.B) {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("Authorization", "Bearer "+placeholderA)
			for b.Loop() {
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestMaskResponses: a server that echoes the request back shows the
// client the placeholders, not the values, in headers and body.
func TestMaskResponses(t *testing.T) {
	w := newWorld(t)
	seen := make(chan string, 1)
	echo := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("X-Echo", r.Header.Get("Authorization"))
		d := describeRequest(r)
		seen <- d
		io.WriteString(rw, d)
	})
	api := w.serve(t, "api.test", echo)
	p := w.proxy(nil)
	p.MaskResponses = true
	c := w.client(t, startProxy(t, p))
	got, resp := send(t, c, api, placeholderA)
	if server := <-seen; server != describe(valueA) {
		t.Errorf("the server received %q, want the values", server)
	}
	if strings.Contains(got, valueA) || strings.Contains(resp.Header.Get("X-Echo"), valueA) {
		t.Errorf("the value came back to the client: %q %q", got, resp.Header.Get("X-Echo"))
	}
	if want := describe(placeholderA); got != want || resp.Header.Get("X-Echo") != "Bearer "+placeholderA {
		t.Errorf("client saw\n%s (%q)\nwant\n%s", got, resp.Header.Get("X-Echo"), want)
	}
}

func describeRequest(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	c, _ := r.Cookie("session")
	cookie := ""
	if c != nil {
		cookie = c.Value
	}
	return fmt.Sprintf("auth=%s custom=%s cookie=%s query=%s body=%s",
		r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), cookie, r.URL.RawQuery, b)
}
