package webhooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// fakeOutbox hands out one delivery and records how it was settled.
type fakeOutbox struct {
	mu      sync.Mutex
	pending []store.WebhookDelivery
	settled []store.WebhookOutcome
}

func (f *fakeOutbox) ClaimWebhookDeliveries(context.Context, time.Duration, int) ([]store.WebhookDelivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.pending
	f.pending = nil
	return out, nil
}

func (f *fakeOutbox) SettleWebhookDelivery(_ context.Context, _ store.WebhookDelivery, o store.WebhookOutcome) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled = append(f.settled, o)
	return nil
}

func (f *fakeOutbox) CountWebhookDeliveries(context.Context) (int64, error) { return 0, nil }

// plainKeys "opens" a secret by returning it.
type plainKeys struct{}

func (plainKeys) Open(b []byte, _ string) ([]byte, error) { return b, nil }

// TestAttemptOutcomes: a 2xx acknowledges, a 3xx disables (the redirect
// not followed), a 5xx is retried within the backoff bounds until the
// last attempt, which drops it counting towards auto-disable.
func TestAttemptOutcomes(t *testing.T) {
	followed := false
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("webhook-id") != "whe_1" || !strings.HasPrefix(r.Header.Get("webhook-signature"), "v1,") {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok2", http.StatusFound) })
	mux.HandleFunc("/ok2", func(http.ResponseWriter, *http.Request) { followed = true })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	guard := &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	for _, tc := range []struct {
		path     string
		attempts int
		check    func(store.WebhookOutcome) bool
	}{
		{"/ok", 1, func(o store.WebhookOutcome) bool { return o.Delivered && o.Disable == "" }},
		{"/moved", 1, func(o store.WebhookOutcome) bool { return !o.Delivered && strings.Contains(o.Disable, "redirect") }},
		{"/fail", 1, func(o store.WebhookOutcome) bool { return o.RetryIn >= time.Second && o.RetryIn <= 4*time.Second }},
		{"/fail", 3, func(o store.WebhookOutcome) bool {
			return o.RetryIn == 0 && o.DisableAfter == DefaultDisableAfter && o.Disable == ""
		}},
	} {
		f := &fakeOutbox{pending: []store.WebhookDelivery{{EndpointID: "whep_1", EventID: "whe_1", EventType: "agent.created",
			Body: []byte(`{}`), Attempts: tc.attempts, URL: srv.URL + tc.path, SealedSecret: []byte(NewSecret())}}}
		d := New(Config{Store: f, Keys: plainKeys{}, Guard: guard, AllowHTTP: true, MinBackoff: time.Second, MaxBackoff: 4 * time.Second})
		if n := d.round(context.Background()); n != 1 || len(f.settled) != 1 || !tc.check(f.settled[0]) {
			t.Errorf("%s (attempt %d): claimed %d, settled %+v", tc.path, tc.attempts, n, f.settled)
		}
	}
	if followed {
		t.Error("a redirect was followed")
	}
}
