package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
)

// Backdoor reaches a store's database from another connection, for the
// tests of how the database's own errors map to the store's.
type Backdoor interface {
	// Lock holds, until unlock is called, a lock that keeps every write
	// to table waiting.
	Lock(t *testing.T, table string) (unlock func())
	// FailInserts makes every insert into table fail with an error of the
	// database whose message is msg, raised by a trigger: not a
	// constraint violation.
	FailInserts(t *testing.T, table, msg string)
}

// RunErrors runs the tests of the errors every backend maps the same
// way. open must return a new empty store whose statements wait for a lock
// another connection holds well under a second before they fail, and its
// Backdoor; RunErrors closes the store.
func RunErrors(t *testing.T, open func(t *testing.T) (store.Store, Backdoor)) {
	for _, tt := range []struct {
		name string
		fn   func(*testing.T, store.Store, Backdoor)
	}{
		{"UniqueByCode", testUniqueByCode},
		{"Busy", testBusy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, b := open(t)
			defer s.Close()
			tt.fn(t, s, b)
		})
	}
}

func apiKey(hash string) store.APIKey {
	return store.APIKey{ID: ids.New(ids.APIKey), Hash: hash, CreatedAt: time.Now()}
}

// testUniqueByCode: a unique violation is ErrConflict; an error that only
// reads like one (a trigger's, worded as either database words a unique
// violation) is not.
func testUniqueByCode(t *testing.T, s store.Store, b Backdoor) {
	ctx := context.Background()
	if err := s.CreateAPIKey(ctx, apiKey("h1")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAPIKey(ctx, apiKey("h1")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate hash: %v, want ErrConflict", err)
	}
	b.FailInserts(t, "api_keys", `UNIQUE constraint failed: api_keys.hash; duplicate key value violates unique constraint "api_keys_hash_key"`)
	err := s.CreateAPIKey(ctx, apiKey("h2"))
	if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("an insert a trigger refused: %v, want an error that is neither ErrConflict nor ErrUnavailable", err)
	}
}

// testBusy: a write that waited for another connection's lock until the
// database gave up fails with ErrUnavailable (transient: the same write
// may succeed later), and succeeds once the lock is gone.
func testBusy(t *testing.T, s store.Store, b Backdoor) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unlock := b.Lock(t, "api_keys")
	err := s.CreateAPIKey(ctx, apiKey("h1"))
	unlock()
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrFull) || errors.Is(err, store.ErrConflict) {
		t.Fatalf("a write kept waiting by a lock: %v, want ErrUnavailable", err)
	}
	if err := s.CreateAPIKey(ctx, apiKey("h1")); err != nil {
		t.Fatalf("the same write once the lock is gone: %v", err)
	}
}
