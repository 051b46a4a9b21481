package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// checkRateLimited fails unless resp is a 429 rate_limit_error in the
// API's envelope with a retry-after of whole seconds and a retry-after-ms
// of at most that. It returns the message.
func checkRateLimited(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != http.StatusTooManyRequests ||
		env.Type != "error" || env.Error.Type != "rate_limit_error" || env.RequestID == "" || env.RequestID != resp.Header.Get("request-id") {
		t.Fatalf("want a 429 rate_limit_error envelope, got %d %s", resp.StatusCode, body)
	}
	secs, err1 := strconv.Atoi(resp.Header.Get("retry-after"))
	ms, err2 := strconv.Atoi(resp.Header.Get("retry-after-ms"))
	if err1 != nil || err2 != nil || secs < 1 || ms < 1 || ms > secs*1000 {
		t.Fatalf("retry-after %q, retry-after-ms %q", resp.Header.Get("retry-after"), resp.Header.Get("retry-after-ms"))
	}
	return env.Error.Message
}

// untilLimited sends requests until one is not a 200 and returns that one.
// It fails unless at least burst got through, and at most burst plus what
// perSecond refilled meanwhile.
func untilLimited(t *testing.T, burst int, perSecond float64, send func() (*http.Response, []byte)) (*http.Response, []byte) {
	t.Helper()
	start := time.Now()
	for n := 0; n < 1000; n++ {
		resp, b := send()
		if resp.StatusCode == http.StatusOK {
			continue
		}
		if most := burst + int(time.Since(start).Seconds()*perSecond) + 1; n < burst || n > most {
			t.Fatalf("%d requests got through, want %d to %d", n, burst, most)
		}
		return resp, b
	}
	t.Fatal("1000 requests got through")
	return nil, nil
}

// TestRateLimitPerKeyAndClass: at 60 per minute a key may send a burst of
// 10 (ten seconds' worth), then gets 429 rate_limit_error with retry-after;
// creates and other requests are counted apart, another key has its own
// buckets, and /healthz and the executor endpoints are not limited.
func TestRateLimitPerKeyAndClass(t *testing.T) {
	var executor atomic.Int32
	f := newEdgeFixture(t, Config{
		Limits: KeyLimits{CreatesPerMinute: 60, RequestsPerMinute: 60},
		Executors: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			executor.Add(1)
		}),
	}, nil)
	other, _, err := CreateKey(context.Background(), f.st, "other")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	create := func(key string) (*http.Response, []byte) {
		return f.do(t, key, "POST", "/v1/environments", `{"name":"e`+strconv.Itoa(int(n.Add(1)))+`"}`)
	}
	resp, b := untilLimited(t, 10, 1, func() (*http.Response, []byte) { return create("sk-test") })
	if msg := checkRateLimited(t, resp, b); !strings.Contains(msg, "60 create requests per minute") {
		t.Errorf("message %q does not name the limit", msg)
	}
	if resp.Header.Get("retry-after") != "1" {
		t.Errorf("retry-after %q, want 1 (a token per second)", resp.Header.Get("retry-after"))
	}
	if resp, b := create(other); resp.StatusCode != http.StatusOK {
		t.Fatalf("another key's create: %d %s", resp.StatusCode, b)
	}

	// Reads have their own bucket, untouched by the creates.
	resp, b = untilLimited(t, 10, 1, func() (*http.Response, []byte) { return f.do(t, "sk-test", "GET", "/v1/environments", "") })
	if msg := checkRateLimited(t, resp, b); !strings.Contains(msg, "60 requests per minute") {
		t.Errorf("message %q does not name the limit", msg)
	}
	for range 20 {
		if resp, _ := f.do(t, "", "GET", "/healthz", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: %d", resp.StatusCode)
		}
		if resp, _ := f.do(t, "sk-test", "POST", "/v1/executor/tokens", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("/v1/executor/tokens: %d", resp.StatusCode)
		}
	}
	if executor.Load() != 20 {
		t.Errorf("the executor endpoints served %d requests, want 20", executor.Load())
	}
}

// TestRateLimitRefill: a key that waits the retry-after it was given gets
// through.
func TestRateLimitRefill(t *testing.T) {
	f := newEdgeFixture(t, Config{Limits: KeyLimits{RequestsPerMinute: 600}}, nil) // 10 a second, burst 100
	resp, b := untilLimited(t, 100, 10, func() (*http.Response, []byte) { return f.do(t, "sk-test", "GET", "/v1/agents", "") })
	checkRateLimited(t, resp, b)
	ms, _ := strconv.Atoi(resp.Header.Get("retry-after-ms"))
	if ms > 100 {
		t.Errorf("retry-after-ms %d, want at most 100 at 10 a second", ms)
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	if resp, b := f.do(t, "sk-test", "GET", "/v1/agents", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("after retry-after-ms: %d %s", resp.StatusCode, b)
	}
}

// TestRateLimitOffByDefault: a zero KeyLimits sets no bound.
func TestRateLimitOffByDefault(t *testing.T) {
	f := newEdgeFixture(t, Config{}, nil)
	if f.srv.limits != nil {
		t.Fatal("a zero KeyLimits made a limiter")
	}
	for i := range 200 {
		if resp, b := f.do(t, "sk-test", "GET", "/v1/agents", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
}

// TestLimiterForgetsIdleBuckets: buckets unused for a minute (full again
// by then) are dropped, so the map holds only the keys in use.
func TestLimiterForgetsIdleBuckets(t *testing.T) {
	l := newLimiter(KeyLimits{CreatesPerMinute: 60, RequestsPerMinute: 60})
	t0 := time.Now()
	for i := range 100 {
		if err := l.rate("key"+strconv.Itoa(i), i%2 == 0, t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.rate("busy", false, t0.Add(50*time.Second)); err != nil {
		t.Fatal(err)
	}
	if len(l.buckets) != 101 {
		t.Fatalf("%d buckets, want 101", len(l.buckets))
	}
	if err := l.rate("new", true, t0.Add(61*time.Second)); err != nil {
		t.Fatal(err)
	}
	if len(l.buckets) != 2 {
		t.Fatalf("%d buckets after a minute, want 2 (busy, new)", len(l.buckets))
	}
}

// TestStreamSlots: a key holds at most Streams slots; a released slot is
// free again, released once however often release is called, and another
// key has its own.
func TestStreamSlots(t *testing.T) {
	l := newLimiter(KeyLimits{Streams: 2})
	r1, err := l.admit("a", streamPattern)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.admit("a", streamPattern); err != nil {
		t.Fatal(err)
	}
	_, err = l.admit("a", streamPattern)
	ae, ok := err.(*apiError)
	if !ok || ae.status != http.StatusTooManyRequests || ae.typ != "rate_limit_error" || ae.retryAfter <= 0 || !strings.Contains(ae.message, "at most 2") {
		t.Fatalf("third stream: %v", err)
	}
	if _, err := l.admit("b", streamPattern); err != nil {
		t.Fatalf("another key: %v", err)
	}
	if _, err := l.admit("a", "GET /v1/agents"); err != nil {
		t.Fatalf("not a stream: %v", err)
	}
	r1()
	r1()
	if _, err := l.admit("a", streamPattern); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := l.admit("a", streamPattern); err == nil {
		t.Fatal("a second release freed a second slot")
	}
}
