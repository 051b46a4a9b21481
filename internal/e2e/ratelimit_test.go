package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/httpapi"
	ma "github.com/reinsdev/reins/managedagents"
)

// startLimited starts a server with the per-key limits.
func startLimited(t *testing.T, limits httpapi.KeyLimits) *server {
	t.Helper()
	return startWith(t, options{}, func(c *app.Config) { c.HTTP.Limits = limits })
}

// TestRateLimitedClientsRetry: over the creates limit (60 a minute, a
// burst of 10), the SDK without retries gets a 429 rate_limit_error with
// retry-after, and the SDK with retries waits it out and gets through.
func TestRateLimitedClientsRetry(t *testing.T) {
	s := startLimited(t, httpapi.KeyLimits{CreatesPerMinute: 60})
	ctx := context.Background()
	// Creates until one is refused: the burst, and what refilled meanwhile.
	began := time.Now()
	var err error
	created := 0
	for ; err == nil && created < 100; created++ {
		_, err = s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "burst " + strconv.Itoa(created)})
	}
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || !strings.Contains(ae.RawJSON(), `"type":"`+ma.ErrRateLimit+`"`) {
		t.Fatalf("create %d without retries: %v", created, err)
	}
	if most := 10 + int(time.Since(began).Seconds()) + 1; created-1 < 10 || created-1 > most {
		t.Errorf("%d creates got through, want 10 to %d", created-1, most)
	}
	if ra := ae.Response.Header.Get("retry-after"); ra != "1" {
		t.Errorf("retry-after %q, want 1", ra)
	}

	var statuses []int
	record := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err == nil {
			statuses = append(statuses, resp.StatusCode)
		}
		return resp, err
	}
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	retrying := anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(s.key), option.WithHTTPClient(hc), option.WithMaxRetries(3), option.WithMiddleware(record))
	began = time.Now()
	env, err := retrying.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "patient"})
	waited := time.Since(began)
	if err != nil {
		t.Fatalf("create with retries: %v", err)
	}
	if env.Name != "patient" || len(statuses) < 2 || statuses[0] != http.StatusTooManyRequests || statuses[len(statuses)-1] != http.StatusOK {
		t.Fatalf("create with retries: %q after statuses %v", env.Name, statuses)
	}
	// Reads have their own bucket: they are not limited here.
	if _, err := s.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{}); err != nil {
		t.Fatalf("list after the creates ran out: %v", err)
	}
	t.Logf("the retrying client got through after %s (statuses %v)", waited.Round(time.Millisecond), statuses)
}

// TestStreamCapPerKey: a key may hold Streams event streams at once; one
// more is a 429 rate_limit_error naming the cap, another key is not
// affected, and a closed stream frees its slot.
func TestStreamCapPerKey(t *testing.T) {
	s := startLimited(t, httpapi.KeyLimits{Streams: 2})
	sess := s.newSession(t, s.newAgent(t, "scripted").ID, s.newEnv(t, "streams").ID)
	first := s.openStream(t, sess.ID)
	s.openStream(t, sess.ID)

	err := tryStream(s, sess.ID)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || !strings.Contains(ae.RawJSON(), `"type":"`+ma.ErrRateLimit+`"`) ||
		!strings.Contains(ae.RawJSON(), "at most 2") || ae.Response.Header.Get("retry-after") == "" {
		t.Fatalf("third stream of the key: %v", err)
	}
	other, _, err := httpapi.CreateKey(context.Background(), s.app.Store, "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := tryStream(s.as(other), sess.ID); err != nil {
		t.Fatalf("another key's stream: %v", err)
	}

	first.cancel()
	for range first.ch {
	}
	// The slot is freed as the server's handler returns.
	deadline := time.Now().Add(5 * time.Second)
	for err := tryStream(s, sess.ID); err != nil; err = tryStream(s, sess.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("a stream of the key still refused 5 s after one closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tryStream opens an event stream of the session with the SDK and holds
// it for a second: nil if it stayed open that long (the SDK passes no
// pings on), else why it did not open.
func tryStream(s *server, sessionID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st := s.client.Beta.Sessions.Events.StreamEvents(ctx, sessionID, anthropic.BetaSessionEventStreamParams{})
	defer st.Close()
	if st.Next() {
		return fmt.Errorf("unexpected %s frame", st.Current().Type)
	}
	if err := st.Err(); !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
