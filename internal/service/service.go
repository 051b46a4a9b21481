// Package service gives the server's long-lived parts one lifecycle:
// Start, then Stop, which returns once every goroutine the part started
// has ended. A part keeps a [Base] for the bookkeeping, and the server
// starts its parts in order in a [Group], which stops them in reverse.
//
// The shape follows River's startstop package (Start, Stop, started and
// stopped signals, an idempotent Stop), with one difference: Stop takes a
// context. Stopping the server is bounded by a deadline, and several
// parts have a graceful phase (runners reaching a safe point, executors
// draining, requests finishing) that the deadline cuts short; a
// parameterless Stop would leave each part to invent its own bound.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A Service is a long-lived part of the server.
type Service interface {
	// Start starts the service's work and returns once it is started.
	// ctx bounds the start only: the work runs until Stop.
	Start(ctx context.Context) error
	// Stop ends the service's work and waits until every goroutine it
	// started has returned, or until ctx ends (then it returns an error
	// that wraps ctx's). Stop may be called more than once, and before
	// Start; a service is not started again after Stop.
	Stop(ctx context.Context) error
}

// ErrStopped is returned by Start after Stop.
var ErrStopped = errors.New("service: stopped")

// Base is the bookkeeping of a service: it owns the service's
// goroutines, the context they run under, and the started and stopped
// signals. Its zero value is ready to use. A part keeps it in an
// unexported field, so that Go and Halt stay its own.
type Base struct {
	mu      sync.Mutex // guards the fields below
	state   state
	ctx     context.Context    // the goroutines' context, from Begin to Halt
	cancel  context.CancelFunc // ends ctx
	wg      sync.WaitGroup     // the goroutines Go started
	started chan struct{}      // closed by Begin
	stopped chan struct{}      // closed once Halt has seen every goroutine end
}

type state int

const (
	idle state = iota
	running
	halted
)

func (b *Base) init() {
	if b.started == nil {
		b.started, b.stopped = make(chan struct{}), make(chan struct{})
	}
}

// Begin marks the service started and returns the context its goroutines
// run under: it keeps ctx's values, not its cancellation, and ends when
// Halt is called. It fails after Halt, and when the service is already
// started.
func (b *Base) Begin(ctx context.Context) (context.Context, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	switch b.state {
	case running:
		return nil, errors.New("service: already started")
	case halted:
		return nil, ErrStopped
	}
	b.state = running
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	close(b.started)
	return b.ctx, nil
}

// Context returns the context of the service's goroutines: ended before
// Begin (nothing may run yet) and after Halt.
func (b *Base) Context() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != running {
		return done
	}
	return b.ctx
}

// done is an ended context.
var done = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Go runs f in a goroutine the service owns, with the service's context;
// Halt waits for it. It reports false, and does not run f, when the
// service is not running (before Begin, after Halt).
func (b *Base) Go(f func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != running {
		return false
	}
	b.wg.Add(1)
	ctx := b.ctx
	go func() {
		defer b.wg.Done()
		f(ctx)
	}()
	return true
}

// Halt ends the service's context, so that Go starts nothing more, and
// waits for the goroutines Go started until ctx ends. It may be called
// more than once (each call waits), and before Begin.
func (b *Base) Halt(ctx context.Context) error {
	b.mu.Lock()
	b.init()
	first := b.state != halted
	if b.state == running {
		b.cancel()
	}
	b.state = halted
	b.mu.Unlock()
	if first {
		go func() { // ends when the service's goroutines have
			b.wg.Wait()
			close(b.stopped)
		}()
	}
	select {
	case <-b.stopped:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-b.stopped: // ended as ctx did
		return nil
	default:
		return fmt.Errorf("service: goroutines still running: %w", ctx.Err())
	}
}

// Started returns a channel closed when the service has started.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.started
}

// Stopped returns a channel closed when the service has stopped and every
// goroutine it started has returned.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.stopped
}
