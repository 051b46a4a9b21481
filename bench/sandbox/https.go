package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/reinsdev/reins/sandbox/egress"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// benchHTTPS times GETs through the egress proxy: to a host a credential
// applies to (TLS intercepted, the placeholder substituted) and to one it
// does not (a plain CONNECT tunnel), interleaved in blocks of 50.
func benchHTTPS(n int) {
	upstream, roots := upstreamCert()
	intercepted := serveTLS("127.0.0.1", upstream)
	tunnelled := serveTLS("127.0.0.2", upstream)
	ca, err := egress.NewCA("bench egress")
	if err != nil {
		log.Fatal(err)
	}
	p := &egress.Proxy{
		Policy:        egress.Policy{Unrestricted: true},
		Guard:         &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Credentials:   []egress.Credential{{Placeholder: "reins_placeholder_bench", Value: "real-value", Hosts: []string{"127.0.0.1"}, Header: true}},
		CA:            ca,
		UpstreamRoots: roots,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Serve(ctx, ln)
	clientRoots := roots.Clone()
	clientRoots.AppendCertsFromPEM(ca.CertPEM())
	fmt.Printf("HTTPS GET through the egress proxy, %d each, interleaved:\n", n)
	for _, keepAlive := range []bool{true, false} {
		c := proxyClient(ln.Addr().String(), clientRoots, keepAlive)
		var ti, tt []time.Duration
		for len(ti) < n {
			for i := 0; i < 50; i++ {
				ti = append(ti, get(c, intercepted))
			}
			for i := 0; i < 50; i++ {
				tt = append(tt, get(c, tunnelled))
			}
		}
		what := "kept-alive connection"
		if !keepAlive {
			what = "new connection each  "
		}
		fmt.Printf("  %s  intercepted p50 %8s  p99 %8s | tunnel p50 %8s  p99 %8s | ratio p50 %.2fx\n",
			what, pct(ti, 50), pct(ti, 99), pct(tt, 50), pct(tt, 99), ratio(ti, tt, 50))
	}
}

func get(c *http.Client, url string) time.Duration {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer reins_placeholder_bench")
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(t0)
}

func proxyClient(proxy string, roots *x509.CertPool, keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: !keepAlive,
	}}
}

func serveTLS(ip string, cert tls.Certificate) string {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(ln, "", "")
	return "https://" + ln.Addr().String() + "/"
}

// upstreamCert returns a certificate for 127.0.0.1 and 127.0.0.2 and the
// pool of the CA that issued it.
func upstreamCert() (tls.Certificate, *x509.CertPool) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		log.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("127.0.0.2")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}
