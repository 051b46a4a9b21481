package webhooks

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reinsdev/reins/backoff"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// Defaults of Config.
const (
	DefaultAttempts     = 3
	DefaultMinBackoff   = 5 * time.Second
	DefaultMaxBackoff   = 120 * time.Second
	DefaultTimeout      = 15 * time.Second
	DefaultPoll         = time.Second
	DefaultDisableAfter = 20
	batch               = 16
)

// Store is the outbox the Deliverer drains.
type Store interface {
	ClaimWebhookDeliveries(ctx context.Context, lease time.Duration, limit int) ([]store.WebhookDelivery, error)
	SettleWebhookDelivery(ctx context.Context, d store.WebhookDelivery, o store.WebhookOutcome) error
	CountWebhookDeliveries(ctx context.Context) (int64, error)
}

// Opener opens the signing secrets sealed under the master key;
// *vault.Keyring implements it.
type Opener interface {
	Open(ciphertext []byte, ad string) ([]byte, error)
}

// Config configures a Deliverer. Zero durations and counts take the
// defaults above.
type Config struct {
	Store Store
	Keys  Opener
	// Guard checks every connection to a receiver: a receiver on a
	// loopback or private address is refused (and its endpoint
	// disabled) unless the operator allowed it (--outbound-allow).
	Guard *netguard.Guard
	// AllowHTTP permits http:// URLs (--webhook-allow-http); otherwise
	// only https:// is delivered to.
	AllowHTTP bool
	// Attempts is the most attempts of one delivery.
	Attempts int
	// MinBackoff and MaxBackoff bound the jittered exponential delay
	// between attempts.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one attempt.
	Timeout time.Duration
	// Poll is how often the outbox is read.
	Poll time.Duration
	// DisableAfter disables an endpoint once that many deliveries in a
	// row were dropped with no 2xx.
	DisableAfter int
	// Metrics, if set, registers the Deliverer's metrics.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Deliverer delivers the outbox's events: each claimed delivery is
// POSTed, signed, to its endpoint; any 2xx acknowledges it, a 3xx or a
// refused address disables the endpoint, anything else is retried with
// backoff until Attempts, then dropped. It has the service lifecycle.
type Deliverer struct {
	cfg     Config
	client  *http.Client
	backoff backoff.Policy
	lease   time.Duration
	log     *slog.Logger
	base    service.Base

	outcomes *prometheus.CounterVec
	attempts prometheus.Counter
}

// New returns a Deliverer of cfg.
func New(cfg Config) *Deliverer {
	cfg.Attempts = cmp.Or(cfg.Attempts, DefaultAttempts)
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, DefaultMinBackoff)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.DisableAfter = cmp.Or(cfg.DisableAfter, DefaultDisableAfter)
	guard := cfg.Guard
	if guard == nil {
		guard = &netguard.Guard{}
	}
	client := guard.Client(cfg.Timeout)
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d := &Deliverer{cfg: cfg, client: client, backoff: backoff.Policy{Base: cfg.MinBackoff, Max: cfg.MaxBackoff},
		// A claim outlives its attempt; a process that dies holding it
		// leaves the delivery due again when it ends.
		lease: 2*cfg.Timeout + 5*time.Second,
		log:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reins_webhook_deliveries_total",
			Help: "Webhook deliveries settled by outcome: delivered (a 2xx), retried, dropped (attempts exhausted), disabled (the endpoint was disabled)."}, []string{"outcome"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{Name: "reins_webhook_attempts_total",
			Help: "Webhook delivery attempts (POSTs to endpoints) made by this replica."}),
	}
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(d.outcomes, d.attempts, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "reins_webhook_queue_depth",
			Help: "Webhook deliveries queued in the outbox, in the whole database."}, d.depth))
	}
	return d
}

// depth reads the outbox's depth for the gauge (-1 when it cannot).
func (d *Deliverer) depth() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := d.cfg.Store.CountWebhookDeliveries(ctx)
	if err != nil {
		return -1
	}
	return float64(n)
}

// Start implements service.Service.
func (d *Deliverer) Start(ctx context.Context) error {
	if _, err := d.base.Begin(ctx); err != nil {
		return err
	}
	d.base.Go(d.loop)
	return nil
}

// Stop implements service.Service: attempts in flight are cut off; their
// deliveries are claimed again after their lease.
func (d *Deliverer) Stop(ctx context.Context) error { return d.base.Halt(ctx) }

func (d *Deliverer) loop(ctx context.Context) {
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		d.drain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// drain delivers batches until the outbox has no more due.
func (d *Deliverer) drain(ctx context.Context) {
	for ctx.Err() == nil && d.round(ctx) == batch {
		continue
	}
}

// round claims and delivers one batch; it returns how many it claimed.
func (d *Deliverer) round(ctx context.Context) int {
	ds, err := d.cfg.Store.ClaimWebhookDeliveries(ctx, d.lease, batch)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("claim webhook deliveries", "err", err)
		}
		return 0
	}
	var wg sync.WaitGroup
	for _, del := range ds {
		wg.Go(func() { d.deliver(ctx, del) })
	}
	wg.Wait()
	return len(ds)
}

// deliver makes one attempt of del and settles it.
func (d *Deliverer) deliver(ctx context.Context, del store.WebhookDelivery) {
	o := d.attempt(ctx, del)
	if ctx.Err() != nil {
		return // stopping: the claim's lease ends and another round retries
	}
	outcome := "delivered"
	switch {
	case o.Disable != "":
		outcome = "disabled"
		d.log.Warn("webhook endpoint disabled", "endpoint", del.EndpointID, "reason", o.Disable)
	case o.Delivered:
	case del.Attempts < d.cfg.Attempts:
		outcome, o.RetryIn = "retried", max(d.backoff.Delay(del.Attempts), d.cfg.MinBackoff)
	default:
		outcome, o.DisableAfter = "dropped", d.cfg.DisableAfter
	}
	if err := d.cfg.Store.SettleWebhookDelivery(context.WithoutCancel(ctx), del, o); err != nil {
		d.log.Warn("settle webhook delivery", "endpoint", del.EndpointID, "event", del.EventID, "err", err)
		return
	}
	d.outcomes.WithLabelValues(outcome).Inc()
}

// attempt POSTs del to its endpoint: the outcome's Delivered or Disable,
// or neither for a failure.
func (d *Deliverer) attempt(ctx context.Context, del store.WebhookDelivery) store.WebhookOutcome {
	u, err := url.Parse(del.URL)
	if err != nil {
		return store.WebhookOutcome{Disable: fmt.Sprintf("the URL is malformed: %v", err)}
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && d.cfg.AllowHTTP) {
		return store.WebhookOutcome{Disable: "the URL is not https (an operator can allow http with --webhook-allow-http)"}
	}
	secret, err := d.cfg.Keys.Open(del.SealedSecret, del.EndpointID)
	if err != nil {
		d.log.Error("open a webhook signing secret", "endpoint", del.EndpointID, "err", err)
		return store.WebhookOutcome{}
	}
	req, err := d.request(ctx, del, string(secret))
	if err != nil {
		return store.WebhookOutcome{Disable: err.Error()}
	}
	d.attempts.Inc()
	resp, err := d.client.Do(req)
	if denied, ok := errors.AsType[*netguard.DeniedError](err); ok {
		return store.WebhookOutcome{Disable: "the receiver's address is refused: " + denied.Error()}
	}
	if err != nil {
		d.log.Info("webhook delivery failed", "endpoint", del.EndpointID, "event", del.EventID, "attempt", del.Attempts, "err", err)
		return store.WebhookOutcome{}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return store.WebhookOutcome{Delivered: true}
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return store.WebhookOutcome{Disable: fmt.Sprintf("the endpoint answered %d, a redirect; redirects are not followed", resp.StatusCode)}
	}
	d.log.Info("webhook delivery failed", "endpoint", del.EndpointID, "event", del.EventID, "attempt", del.Attempts, "status", resp.StatusCode)
	return store.WebhookOutcome{}
}

// request is the signed POST of del.
func (d *Deliverer) request(ctx context.Context, del store.WebhookDelivery, secret string) (*http.Request, error) {
	now := time.Now()
	sig, err := Signature(secret, del.EventID, now, del.Body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, del.URL, bytes.NewReader(del.Body))
	if err != nil {
		return nil, fmt.Errorf("the URL is malformed: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "reins-webhooks")
	req.Header.Set("webhook-id", del.EventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	return req, nil
}
