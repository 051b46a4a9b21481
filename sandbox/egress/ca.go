package egress

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sync"
	"time"
)

// Certificate lifetimes and the size of a CA's leaf cache.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 72 * time.Hour
	// A cached leaf is minted again when less than this is left of it.
	leafRenewBefore = 24 * time.Hour
	// clockSkew backdates certificates for clients whose clock is behind.
	clockSkew     = time.Hour
	leafCacheSize = 256
)

// A CA is the certificate authority with which the proxy intercepts TLS
// to hosts that have credentials: it mints, for each such host, a leaf
// certificate that clients trusting the CA accept. A CA is safe for
// concurrent use.
//
// Its private key lets whoever holds it impersonate any host to the
// sandboxes that trust the CA. A caller that keeps a CA across restarts
// must seal the output of MarshalKey (for example with the vault
// keyring) before storing it, and must never put it in a sandbox; the
// sandbox gets CertPEM only.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer

	mu     sync.Mutex               // guards the fields below
	leaves map[string]*list.Element // host → element of lru holding a *cachedLeaf
	lru    list.List                // most recently used first
}

type cachedLeaf struct {
	host string
	cert *tls.Certificate
}

// NewCA creates a self-signed CA named name with a new ECDSA P-256 key,
// valid for ten years.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("egress: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress: CA certificate: %w", err)
	}
	return newCA(cert, key), nil
}

// LoadCA restores a CA from its certificate, as CertPEM returned it, and
// its key, as MarshalKey returned it.
func LoadCA(certPEM, keyDER []byte) (*CA, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("egress: CA certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress: CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("egress: CA certificate: not a CA certificate")
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("egress: CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("egress: CA key: %T, want an ECDSA key", k)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("egress: CA key does not match the certificate")
	}
	return newCA(cert, key), nil
}

func newCA(cert *x509.Certificate, key crypto.Signer) *CA {
	return &CA{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		key:     key,
		leaves:  make(map[string]*list.Element),
	}
}

// CertPEM returns the CA's certificate in PEM form, for the sandboxes to
// trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// MarshalKey returns the CA's private key in PKCS #8 DER form. The caller
// must seal it before storing it; see CA.
func (ca *CA) MarshalKey() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress: CA key: %w", err)
	}
	return der, nil
}

// leaf returns a certificate for host, a normalized name or IP literal,
// from the cache if it holds one with a day or more left.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	now := time.Now()
	if e, ok := ca.leaves[host]; ok {
		cl := e.Value.(*cachedLeaf)
		if now.Add(leafRenewBefore).Before(cl.cert.Leaf.NotAfter) {
			ca.lru.MoveToFront(e)
			return cl.cert, nil
		}
		ca.lru.Remove(e)
		delete(ca.leaves, host)
	}
	cert, err := ca.mint(host, now)
	if err != nil {
		return nil, err
	}
	ca.leaves[host] = ca.lru.PushFront(&cachedLeaf{host, cert})
	if ca.lru.Len() > leafCacheSize {
		oldest := ca.lru.Back()
		ca.lru.Remove(oldest)
		delete(ca.leaves, oldest.Value.(*cachedLeaf).host)
	}
	return cert, nil
}

// mint signs a new leaf certificate for host with a new P-256 key.
func (ca *CA) mint(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress: leaf key for %s: %w", host, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafValidity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress: leaf certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress: leaf certificate for %s: %w", host, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// newSerial returns a random 128-bit certificate serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("egress: certificate serial: %w", err)
	}
	return n, nil
}
