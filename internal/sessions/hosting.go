package sessions

import (
	"context"
	"errors"
	"sync"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Hosting answers whether an environment is self-hosted (its sessions'
// tools run on pull workers and executors outside the server). It is the
// one place that answers it, for the API and for the harness's workers.
//
// The answer is remembered per environment: an environment's config.type
// cannot change (the update endpoint refuses it) and ids are never reused,
// so a remembered answer never goes stale; Forget drops it once the
// environment is deleted, to bound the memory.
type Hosting struct {
	envs EnvironmentReader

	mu    sync.Mutex      // guards the field below
	known map[string]bool // environment id -> self-hosted
}

// EnvironmentReader reads environments. A store.Store is one.
type EnvironmentReader interface {
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
}

// NewHosting returns a Hosting that reads environments from envs.
func NewHosting(envs EnvironmentReader) *Hosting {
	return &Hosting{envs: envs, known: make(map[string]bool)}
}

// SelfHosted reports whether the environment is self-hosted; an
// environment that does not exist is not.
func (h *Hosting) SelfHosted(ctx context.Context, envID string) (bool, error) {
	h.mu.Lock()
	hosted, ok := h.known[envID]
	h.mu.Unlock()
	if ok {
		return hosted, nil
	}
	env, err := h.envs.GetEnvironment(ctx, envID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	hosted = IsSelfHosted(&env)
	h.mu.Lock()
	h.known[envID] = hosted
	h.mu.Unlock()
	return hosted, nil
}

// Forget drops what is remembered of a deleted environment. Call it after
// the deletion committed.
func (h *Hosting) Forget(envID string) {
	h.mu.Lock()
	delete(h.known, envID)
	h.mu.Unlock()
}

// IsSelfHosted is the rule: an environment is self-hosted when it admits
// outside executors.
func IsSelfHosted(env *ma.Environment) bool { return env.CheckOutsideExecutors() == nil }
