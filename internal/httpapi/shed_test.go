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
		s := newShedder(2)
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
	if s := newShedder(0); s.slots != nil {
		t.Fatal("a zero bound made a shedder")
	}
}
