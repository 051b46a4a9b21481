package httpapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestShedderBoundsRequestsAtOnce: over the bound a request waits up to
// shedWait for a slot, then is refused with 503 and retry-after; lasting
// routes are not counted.
func TestShedderBoundsRequestsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShedder(2, 0)
		ctx := context.Background()
		var held []func()
		for range 2 {
			leave, err := s.enter(ctx, "POST /v1/sessions/{id}/events")
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, leave)
		}
		if leave, err := s.enter(ctx, "GET /v1/sessions/{id}/events/stream"); err != nil {
			t.Fatalf("a stream was counted: %v", err)
		} else {
			leave()
		}
		start := time.Now()
		_, err := s.enter(ctx, "GET /v1/sessions")
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != http.StatusServiceUnavailable || ae.retryAfter != shedWait || time.Since(start) != shedWait {
			t.Fatalf("over the bound: %v after %v, want 503 with retry-after after %v", err, time.Since(start), shedWait)
		}
		// A slot freed while a request waits goes to it.
		go func() {
			time.Sleep(shedWait / 2)
			held[0]()
		}()
		leave, err := s.enter(ctx, "GET /v1/sessions")
		if err != nil || time.Since(start) != shedWait+shedWait/2 {
			t.Fatalf("waiting request: %v after %v", err, time.Since(start))
		}
		leave()
		held[1]()
		if len(s.slots) != 0 {
			t.Fatalf("%d slots still held", len(s.slots))
		}
	})
}

func TestShedderOffByDefault(t *testing.T) {
	if s := newShedder(0, 0); s.slots != nil || s.lasting != nil {
		t.Fatal("a zero bound made a shedder")
	}
}

// TestShedderBoundsStreamsAtOnce: over the bound on lasting requests an
// event stream or a work poll is refused at once with 503, retry-after
// and a closed connection; other requests are not counted against it,
// and a stream that ends frees its slot.
func TestShedderBoundsStreamsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShedder(0, 2)
		ctx := context.Background()
		first, err := s.enter(ctx, streamPattern)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.enter(ctx, "GET /v1/environments/{id}/work/poll"); err != nil {
			t.Fatal(err)
		}
		leave, err := s.enter(ctx, "GET /v1/sessions")
		if err != nil {
			t.Fatalf("a request was counted as lasting: %v", err)
		}
		leave()
		start := time.Now()
		_, err = s.enter(ctx, streamPattern)
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != http.StatusServiceUnavailable || ae.retryAfter != shedWait || !ae.closeConn || time.Since(start) != 0 {
			t.Fatalf("over the bound: %v after %v, want 503 with retry-after and a closed connection at once", err, time.Since(start))
		}
		first()
		if _, err := s.enter(ctx, streamPattern); err != nil {
			t.Fatalf("after a stream ended: %v", err)
		}
	})
}
