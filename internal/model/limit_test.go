package model

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// gauge is a Provider whose calls block until release is closed; it
// records the most calls it had at once.
type gauge struct {
	release chan struct{}
	mu      sync.Mutex // guards the fields below
	now     int
	peak    int
}

func (g *gauge) Stream(ctx context.Context, _ *Request, _ Sink) (*Response, error) {
	g.mu.Lock()
	g.now++
	g.peak = max(g.peak, g.now)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &Response{}, nil
}

func (g *gauge) calls() (now, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now, g.peak
}

// TestLimitHoldsBounds runs six calls on each of two providers, each
// bounded to 2, under a shared bound of 3.
func TestLimitHoldsBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &gauge{release: make(chan struct{})}, &gauge{release: make(chan struct{})}
		all := NewLimiter(3)
		r := Router{"anthropic": Limit(a, NewLimiter(2), all), "openai": Limit(b, NewLimiter(2), all)}
		var wg sync.WaitGroup
		for i := range 12 {
			m := "claude"
			if i%2 == 1 {
				m = "openai/gpt"
			}
			wg.Go(func() {
				if _, err := r.Stream(t.Context(), &Request{Model: m}, DiscardSink{}); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		na, _ := a.calls()
		nb, _ := b.calls()
		if na > 2 || nb > 2 || na+nb != 3 {
			t.Fatalf("in flight: anthropic %d, openai %d; want at most 2 each, 3 together", na, nb)
		}
		close(a.release)
		close(b.release)
		wg.Wait()
		_, pa := a.calls()
		_, pb := b.calls()
		if pa > 2 || pb > 2 {
			t.Fatalf("peaks: anthropic %d, openai %d; want at most 2", pa, pb)
		}
	})
}

// TestLimitWaitEndsWithContext: a call waiting for a slot gives up when its
// context ends, and gives back the slots it took.
func TestLimitWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gauge{release: make(chan struct{})}
		own, all := NewLimiter(1), NewLimiter(1)
		p := Limit(g, own, all)
		held := Limit(g, all) // another provider's call holds the shared slot
		go held.Stream(t.Context(), &Request{}, DiscardSink{})
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := p.Stream(ctx, &Request{}, DiscardSink{})
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if len(own.slots) != 0 {
			t.Fatal("the provider's slot was not given back")
		}
		close(g.release)
	})
}

func TestNewLimiterUnbounded(t *testing.T) {
	if NewLimiter(0) != nil || NewLimiter(-1) != nil {
		t.Fatal("NewLimiter(n <= 0) is a bound")
	}
}

// forwarder is an Upstream whose responses' bodies stay open until the
// caller closes them.
type forwarder struct{ gauge }

func (f *forwarder) Forward(context.Context, string, http.Header, []byte) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// TestLimitForwardHoldsSlotUntilBodyClosed: a forwarded call (the model
// gateway's) holds its slot while its response's body is open, and a
// call over the bound waits for the close.
func TestLimitForwardHoldsSlotUntilBodyClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := Router{"anthropic": Limit(&forwarder{}, NewLimiter(1))}
		up, err := r.Upstream("anthropic")
		if err != nil {
			t.Fatal(err)
		}
		first, err := up.Forward(t.Context(), "v1/messages", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		second := make(chan *http.Response)
		go func() {
			res, err := up.Forward(t.Context(), "v1/messages", nil, nil)
			if err != nil {
				t.Error(err)
			}
			second <- res
		}()
		synctest.Wait()
		select {
		case <-second:
			t.Fatal("a second call got a slot while the first's body was open")
		default:
		}
		first.Body.Close()
		first.Body.Close() // twice: the slot is given back once
		(<-second).Body.Close()
		if _, err := (Router{}).Upstream("openai"); err == nil || !strings.Contains(err.Error(), "not configured") {
			t.Fatalf("a missing provider: %v", err)
		}
	})
}
