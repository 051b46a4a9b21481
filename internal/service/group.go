package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A Group starts services one after the other, in the order they were
// added, and stops them in the reverse order: a service may use those
// added before it until it stops. The zero value is ready to use.
type Group struct {
	mu      sync.Mutex // guards members
	members []member
}

type member struct {
	name string
	s    Service
}

// Add appends s to the group, named name in errors.
func (g *Group) Add(name string, s Service) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = append(g.members, member{name, s})
}

// Start starts the services in order, each with ctx, and stops at the
// first that fails, returning its error. Stop stops them all then.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	members := g.members
	g.mu.Unlock()
	for _, m := range members {
		if err := m.s.Start(ctx); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

// Stop stops every service of the group, started or not, the last added
// first, each with ctx, and joins their errors. Every service is asked to
// stop even once ctx has ended: each then ends its work at once rather
// than gracefully.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	members := g.members
	g.mu.Unlock()
	var errs []error
	for i := len(members) - 1; i >= 0; i-- {
		if err := members[i].s.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", members[i].name, err))
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
