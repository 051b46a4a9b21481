package toolhost

import (
	"context"
	"errors"
	"fmt"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/store"
)

// CredentialStore is what the executor hub's credential checks read.
type CredentialStore interface {
	environmentGetter
	EnvironmentKeyByHash(ctx context.Context, hash string) (store.EnvironmentKey, error)
	MachineByHash(ctx context.Context, hash string) (store.Machine, error)
}

// NewHub returns the executor hub of opts, whose executors authenticate
// with the environment keys and machine tokens of st, and may register
// only where outside executors may serve (then as opts.AllowRegistration
// says, if set).
func NewHub(opts executorhub.HubOptions, st CredentialStore) *executorhub.Hub {
	c := credentials{st}
	opts.Credentials = c
	opts.AllowRegistration = chainRegistration(c.allowRegistration, opts.AllowRegistration)
	return executorhub.NewHub(opts)
}

// credentials lets the executor hub check environment keys against the
// store.
type credentials struct{ st CredentialStore }

// VerifyEnvironmentKey implements executorhub.Credentials: an environment
// key is good while it is not revoked and its environment lives and may
// be served by outside executors.
func (c credentials) VerifyEnvironmentKey(ctx context.Context, keyHash string) (string, error) {
	k, err := c.st.EnvironmentKeyByHash(ctx, keyHash)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: unknown environment key", executor.ErrCredentialRejected)
	}
	if err != nil {
		return "", err
	}
	if k.RevokedAt != nil {
		return "", fmt.Errorf("%w: environment key %s was revoked", executor.ErrCredentialRejected, k.ID)
	}
	env, err := c.st.GetEnvironment(ctx, k.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: environment %s was deleted", executor.ErrCredentialRejected, k.EnvironmentID)
	}
	if err != nil {
		return "", err
	}
	if env.ArchivedAt != nil {
		return "", fmt.Errorf("%w: environment %s is archived", executor.ErrCredentialRejected, env.ID)
	}
	if err := env.CheckOutsideExecutors(); err != nil {
		return "", fmt.Errorf("%w: environment key %s: %w", executor.ErrCredentialRejected, k.ID, err)
	}
	return env.ID, nil
}

// allowRegistration is the hub's AllowRegistration: an outside executor
// may only register in an environment that outside executors may serve.
// It holds whatever token the executor has, including one issued before
// its environment's keys were refused, so a cloud environment's sessions,
// and the credentials assigned with them, only ever reach its in-process
// executor.
func (c credentials) allowRegistration(ctx context.Context, r executorhub.Registration) error {
	if r.Local || r.EnvironmentID == "" {
		return nil
	}
	env, err := c.st.GetEnvironment(ctx, r.EnvironmentID)
	if err != nil {
		return err
	}
	return env.CheckOutsideExecutors()
}

// VerifyMachineToken implements executorhub.Credentials: a machine token is
// good while its machine is not revoked.
func (c credentials) VerifyMachineToken(ctx context.Context, tokenHash string) (string, error) {
	m, err := c.st.MachineByHash(ctx, tokenHash)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: unknown machine token", executor.ErrCredentialRejected)
	}
	if err != nil {
		return "", err
	}
	if m.RevokedAt != nil {
		return "", fmt.Errorf("%w: machine %s was revoked", executor.ErrCredentialRejected, m.ID)
	}
	return m.ID, nil
}

// chainRegistration returns an AllowRegistration that asks first, then
// next if it is set.
func chainRegistration(first, next func(context.Context, executorhub.Registration) error) func(context.Context, executorhub.Registration) error {
	if next == nil {
		return first
	}
	return func(ctx context.Context, r executorhub.Registration) error {
		if err := first(ctx, r); err != nil {
			return err
		}
		return next(ctx, r)
	}
}

// Executors implements httpapi.ExecutorList: the hub's executors of the
// environment (GET /v1/environments/{id}/executors).
func (t *Host) Executors(environmentID string) []httpapi.ExecutorView {
	var out []httpapi.ExecutorView
	for _, e := range t.hub.Executors() {
		if e.EnvironmentID != environmentID {
			continue
		}
		out = append(out, httpapi.ExecutorView{Type: "executor", ID: e.ID, EnvironmentID: e.EnvironmentID, MachineID: e.MachineID,
			Name: e.Executor.Name, Version: e.Executor.Version, OS: e.Executor.OS, Arch: e.Executor.Arch, Hostname: e.Executor.Hostname,
			Capabilities: e.Capabilities, MaxSessions: e.MaxSessions, Sessions: e.SessionIDs})
	}
	return out
}
