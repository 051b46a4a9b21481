package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A Group starts services one after the other and stops the started ones
// in the reverse order: a service may use those started before it until
// it stops. The zero value is ready to use.
type Group struct {
	mu      sync.Mutex // guards started
	started []member
}

type member struct {
	name string
	s    Service
}

// Start starts s, named name in errors. A service whose Start fails is
// stopped at once (what it started is ended) and not kept.
func (g *Group) Start(ctx context.Context, name string, s Service) error {
	if err := s.Start(ctx); err != nil {
		return errors.Join(fmt.Errorf("%s: %w", name, err), s.Stop(ctx))
	}
	g.mu.Lock()
	g.started = append(g.started, member{name, s})
	g.mu.Unlock()
	return nil
}

// Stop stops the started services, the last started first, each with
// ctx, and joins their errors. Every service is asked to stop even once
// ctx has ended: each then ends its work at once rather than gracefully.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	started := g.started
	g.started = nil
	g.mu.Unlock()
	var errs []error
	for i := len(started) - 1; i >= 0; i-- {
		if err := started[i].s.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", started[i].name, err))
		}
	}
	return errors.Join(errs...)
}

// Hooks is a service made of two functions, for a step of starting or
// stopping that owns no goroutine; nil functions do nothing.
type Hooks struct {
	OnStart func(ctx context.Context) error
	OnStop  func(ctx context.Context) error
}

// Start calls OnStart.
func (h Hooks) Start(ctx context.Context) error {
	if h.OnStart == nil {
		return nil
	}
	return h.OnStart(ctx)
}

// Stop calls OnStop.
func (h Hooks) Stop(ctx context.Context) error {
	if h.OnStop == nil {
		return nil
	}
	return h.OnStop(ctx)
}
