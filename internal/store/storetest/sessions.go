package storetest

import (
	"context"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// The helpers below write sessions straight into a store, for tests of
// code below the sessions service (the harness, streams, the store
// itself) that need a session or log entries without the service's rules.
// The application writes sessions through internal/sessions only.

// NewSession stores sess with evs as its first log entries.
func NewSession(ctx context.Context, s store.Sessions, sess ma.Session, evs ...*ma.Event) (ma.Session, error) {
	if len(evs) == 0 {
		return s.CreateSession(ctx, sess, nil)
	}
	return s.CreateSession(ctx, sess, appendAll(evs))
}

// Append appends evs to the session's log in one transaction (each gets
// its id set, as Tx.Append does).
func Append(ctx context.Context, s store.Sessions, id string, evs ...*ma.Event) (ma.Session, error) {
	return s.UpdateSession(ctx, id, appendAll(evs))
}

// Change runs fn in one transaction on the session, as the store runs a
// session's writes.
func Change(ctx context.Context, s store.Sessions, id string, fn func(store.Tx) error) (ma.Session, error) {
	return s.UpdateSession(ctx, id, fn)
}

func appendAll(evs []*ma.Event) func(store.Tx) error {
	return func(tx store.Tx) error { return tx.Append(evs...) }
}
