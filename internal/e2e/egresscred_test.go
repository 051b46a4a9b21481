package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// testTLS is a CA and a certificate it issued for 127.0.0.1 and
// 127.0.0.2: two "hosts" on this machine's loopback.
type testTLS struct {
	caPEM []byte
	cert  tls.Certificate
}

func newTestTLS(t *testing.T) testTLS {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "reins e2e upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("127.0.0.2")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return testTLS{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// authRecorder is an HTTPS server that records the Authorization headers
// and bodies it receives.
type authRecorder struct {
	mu   sync.Mutex
	seen []string
	url  string
}

func startAuthRecorder(t *testing.T, ip string, tt testTLS) *authRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	r := &authRecorder{url: "https://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.URL.Path+" "+req.Header.Get("Authorization"))
		r.mu.Unlock()
		// It echoes the credential back: the proxy masks it.
		fmt.Fprintf(w, "ok %s (%s)\n", req.URL.Path, req.Header.Get("Authorization"))
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{tt.cert}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *authRecorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.seen...)
}

// TestCredentialSubstitutedAtEgress: a cloud session's
// environment_variable credential is a placeholder inside the sandbox;
// the egress proxy puts the value in requests to the credential's host
// (curl and Python's urllib), leaves the placeholder for other hosts, and
// the value is nowhere in the sandbox, the events or the database.
func TestCredentialSubstitutedAtEgress(t *testing.T) {
	tt := newTestTLS(t)
	allowed := startAuthRecorder(t, "127.0.0.1", tt)
	other := startAuthRecorder(t, "127.0.0.2", tt)
	roots := filepath.Join(t.TempDir(), "upstream-ca.pem")
	os.WriteFile(roots, tt.caPEM, 0o644)
	t.Setenv("SSL_CERT_FILE", roots) // the server's proxy verifies the test servers against it
	var cleartextHits atomic.Int64
	cleartext := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { cleartextHits.Add(1) }))
	defer cleartext.Close()
	s := startEscapeServer(t, "--egress-allow", "127.0.0.0/8")

	const value = "sk-live-substituted-0123456789abcdef"
	var v struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]any{"display_name": "egress"}, &v); err != nil {
		t.Fatal(err)
	}
	if _, err := call(s.url, s.key, "POST", "/v1/vaults/"+v.ID+"/credentials", map[string]any{"auth": map[string]any{
		"type": "environment_variable", "secret_name": "MY_SECRET", "secret_value": value,
		"networking": map[string]any{"type": "limited", "allowed_hosts": []string{"127.0.0.1"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	envID := s.env(t, map[string]any{"type": "limited", "allowed_hosts": []string{"127.0.0.1", "127.0.0.2"}})
	var sess ma.Session
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": s.agent, "environment_id": envID, "vault_ids": []string{v.ID}}, &sess); err != nil {
		t.Fatal(err)
	}
	// The other host is tunnelled untouched: the sandbox sees its own
	// certificate, from a CA only this test knows (hence -k).
	out := s.bash(t, sess.ID, fmt.Sprintf(`curl -sS --noproxy '' -x "$HTTPS_PROXY" -H "Authorization: Bearer $MY_SECRET" %[1]s/curl
curl -sS -k --noproxy '' -x "$HTTPS_PROXY" -H "Authorization: Bearer $MY_SECRET" %[2]s/other
no_proxy= NO_PROXY= /usr/bin/python3 -c 'import os, urllib.request as u
print(u.urlopen(u.Request("%[1]s/urllib", headers={"Authorization": "Bearer " + os.environ["MY_SECRET"]})).read().decode())'
echo "ENV $MY_SECRET"; tr '\0' '\n' < /proc/self/environ | grep MY_SECRET
echo "REV $(printf %%s "$MY_SECRET" | rev)"; echo "B64 $(printf %%s "$MY_SECRET" | base64 -w0)"
curl -sS --noproxy '' -x "$HTTPS_PROXY" -H "Authorization: Bearer $MY_SECRET" %[3]s/cleartext`, allowed.url, other.url, cleartext.URL))
	t.Logf("%s", out)
	ph := regexp.MustCompile(`ENV (reins_placeholder_[0-9a-f]+)`).FindStringSubmatch(out)
	if ph == nil {
		t.Fatalf("the variable does not hold a placeholder:\n%s", out)
	}
	placeholder := ph[1]
	if !strings.Contains(out, "ok /curl") || !strings.Contains(out, "ok /urllib") || !strings.Contains(out, "ok /other") {
		t.Fatalf("the requests did not go through:\n%s", out)
	}
	for _, want := range []string{"/curl Bearer " + value, "/urllib Bearer " + value} {
		if !slicesContain(allowed.requests(), want) {
			t.Errorf("the credential's host did not receive the value: %q", allowed.requests())
		}
	}
	if got := other.requests(); len(got) != 1 || got[0] != "/other Bearer "+placeholder {
		t.Errorf("another host received %q, want the placeholder", got)
	}
	if !strings.Contains(out, "REV "+reverseString(placeholder)) || !strings.Contains(out, "B64 "+base64.StdEncoding.EncodeToString([]byte(placeholder))) {
		t.Errorf("rev and base64 of the variable do not print the placeholder's forms:\n%s", out)
	}
	// Over plain HTTP the credential is not sent: the proxy says why.
	if !strings.Contains(out, "credentials are substituted only over HTTPS, and this is a plain http:// request to 127.0.0.1") ||
		!strings.Contains(out, "--egress-cleartext-credentials") || cleartextHits.Load() != 0 {
		t.Errorf("a plain http:// request with the placeholder was not refused (%d reached the host):\n%s", cleartextHits.Load(), out)
	}
	if strings.Contains(out, value) || strings.Contains(out, reverseString(value)) {
		t.Errorf("the value reached the sandbox:\n%s", out)
	}
	var raw json.RawMessage
	if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sess.ID+"/events?limit=1000", nil, &raw); err != nil || strings.Contains(string(raw), value) {
		t.Errorf("the value reached the events (%v)", err)
	}
	filepath.WalkDir(s.dataDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), value) {
				t.Errorf("the value is in clear in %s", p)
			}
		}
		return nil
	})
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func reverseString(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
