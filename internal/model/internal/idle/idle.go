// Package idle cancels a model call whose response stalls: no response
// headers, or no bytes of the streamed body, for longer than a timeout. The
// caller's context bounds a call as a whole; this catches a connection that
// is open but dead, which would otherwise hang a session until someone
// interrupts it.
package idle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// ErrStalled is the cancellation cause of a stalled call.
var ErrStalled = errors.New("the model API sent nothing")

// Watchdog cancels its context when it is not fed for its timeout.
type Watchdog struct {
	timeout time.Duration
	timer   *time.Timer
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stopped atomic.Bool
}

// Start returns a watchdog whose Context is a child of ctx that is cancelled
// with ErrStalled after timeout without Feed. A timeout <= 0 disables it.
// Stop must be called when the call is over.
func Start(ctx context.Context, timeout time.Duration) *Watchdog {
	w := &Watchdog{timeout: timeout}
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	if timeout > 0 {
		w.timer = time.AfterFunc(timeout, func() { w.cancel(ErrStalled) })
	}
	return w
}

// Context returns the context the call must use.
func (w *Watchdog) Context() context.Context { return w.ctx }

// Feed restarts the countdown; it does nothing after Stop.
func (w *Watchdog) Feed() {
	if w.timer != nil && !w.stopped.Load() {
		w.timer.Reset(w.timeout)
	}
}

// Stop ends the watchdog and releases its context.
func (w *Watchdog) Stop() {
	w.stopped.Store(true)
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cancel(nil)
}

// Stalled returns the error to report when the watchdog cancelled the
// call, nil otherwise.
func (w *Watchdog) Stalled() error {
	if w.timer == nil || !errors.Is(context.Cause(w.ctx), ErrStalled) {
		return nil
	}
	return fmt.Errorf("%w for %v", ErrStalled, w.timeout)
}

// Middleware feeds the watchdog when response headers arrive and on every
// read of the response body that returns data. Its type matches the
// middleware of both model SDKs.
func (w *Watchdog) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := next(req)
	if err != nil || resp == nil {
		return resp, err
	}
	w.Feed()
	if resp.Body != nil {
		resp.Body = &body{ReadCloser: resp.Body, w: w}
	}
	return resp, nil
}

type body struct {
	io.ReadCloser
	w *Watchdog
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.Feed()
	}
	return n, err
}
