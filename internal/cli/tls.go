package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// certPollInterval is how often a served certificate's files are checked
// for a change.
const certPollInterval = 2 * time.Second

// tlsFlags are serve's --tls-cert and --tls-key.
type tlsFlags struct {
	cert, key string
}

func (t *tlsFlags) register(f *pflag.FlagSet) {
	f.StringVar(&t.cert, "tls-cert", "",
		"PEM certificate (chain) file to serve HTTPS with, together with --tls-key; reloaded on SIGHUP and when the files change (REINS_TLS_CERT)")
	f.StringVar(&t.key, "tls-key", "", "PEM private key file of --tls-cert (REINS_TLS_KEY)")
	bindEnv(f, envFallback{"tls-cert", "REINS_TLS_CERT"}, envFallback{"tls-key", "REINS_TLS_KEY"})
}

// check refuses one of the two flags without the other.
func (t *tlsFlags) check(f *pflag.FlagSet) error {
	switch {
	case t.cert != "" && t.key == "":
		return flagError(f, "tls-key", "--tls-cert needs its private key too: give both --tls-cert and --tls-key, or neither")
	case t.key != "" && t.cert == "":
		return flagError(f, "tls-cert", "--tls-key needs its certificate too: give both --tls-cert and --tls-key, or neither")
	}
	return nil
}

// scheme is the scheme the server is reached at.
func (t *tlsFlags) scheme() string {
	if t.cert != "" {
		return "https"
	}
	return "http"
}

// certReloader serves the certificate of a pair of files, loaded again on
// SIGHUP and when either file changes. A pair that does not load keeps the
// certificate served before and is logged.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate]

	mu    sync.Mutex // guards stamp and serializes loads
	stamp string     // the files' sizes and modification times when last loaded
}

// newCertReloader loads the pair: an error is fatal at start.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair and serves it.
func (r *certReloader) load() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stamp = r.filesStamp()
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert.Store(&c)
	return nil
}

// filesStamp sums up the files' sizes and modification times.
func (r *certReloader) filesStamp() string {
	var s string
	for _, name := range []string{r.certFile, r.keyFile} {
		if fi, err := os.Stat(name); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			s += "missing;"
		}
	}
	return s
}

// changed reports whether the files differ from those last loaded.
func (r *certReloader) changed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.filesStamp() != r.stamp
}

// reload loads the pair again, logging the outcome.
func (r *certReloader) reload(why string) {
	if err := r.load(); err != nil {
		r.log.Error("TLS certificate not reloaded; still serving the previous one", "reason", why, "err", err)
		return
	}
	r.log.Info("TLS certificate reloaded", "reason", why, "cert", r.certFile)
}

// getCertificate is the tls.Config hook: the pair loaded last.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// watch reloads the pair on SIGHUP and when the files change, until ctx
// ends.
func (r *certReloader) watch(ctx context.Context, poll time.Duration) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload("SIGHUP")
		case <-tick.C:
			if r.changed() {
				r.reload("the files changed")
			}
		}
	}
}

// config is the server's TLS configuration: TLS 1.2 or later, HTTP/2 or
// HTTP/1.1 (WebSocket upgrades use HTTP/1.1), the certificate loaded last.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}, GetCertificate: r.getCertificate}
}

// serverTLS returns the server's TLS configuration of the flags (nil
// without them) and starts watching the files until ctx ends.
func serverTLS(ctx context.Context, t *tlsFlags, log *slog.Logger) (*tls.Config, error) {
	if t.cert == "" {
		return nil, nil
	}
	r, err := newCertReloader(t.cert, t.key, log)
	if err != nil {
		return nil, err
	}
	go r.watch(ctx, certPollInterval)
	return r.config(), nil
}

// caClient returns an HTTP client that trusts the CA certificates (PEM)
// in file besides the system's, or nil (the default client) for "".
func caClient(file string) (*http.Client, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("--ca-cert: " + file + " holds no PEM certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// checkTLS refuses half a certificate pair, and replicas that would
// advertise an http:// URL while serving HTTPS.
func (o *serveOptions) checkTLS() error {
	if err := o.tls.check(o.flags); err != nil {
		return err
	}
	if o.tls.cert != "" && o.databaseURL != "" && o.advertiseURL == "" {
		return flagError(o.flags, "advertise-url", "with --tls-cert and --database-url, give the https:// URL the other replicas reach this one at")
	}
	return nil
}
