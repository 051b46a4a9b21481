package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
	"github.com/reinsdev/reins/store/sqlite"
	"github.com/reinsdev/reins/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reins.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "key_1", Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen (migrations must be idempotent): %v", err)
	}
	defer s.Close()
	if _, err := s.APIKeyByHash(ctx, "h"); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitIsolatesFailures: transactions committed together in one
// batch keep their own outcome; a failing one leaves no trace, and the
// others keep a gap-free log.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	t.Run("grouped", func(t *testing.T) { testCommitIsolatesFailures(t) })
	t.Run("one at a time", func(t *testing.T) { testCommitIsolatesFailures(t, sqlite.MaxBatch(1)) })
}

func testCommitIsolatesFailures(t *testing.T, opts ...sqlite.Option) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess, err := s.CreateSession(ctx, ma.Session{ID: "sesn_g", Status: ma.StatusIdle, Metadata: ma.Metadata{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
				if err := tx.Append(&ma.Event{Type: ma.EventAgentThinking}); err != nil {
					return err
				}
				if i%4 == 0 {
					return boom // written, then undone
				}
				return nil
			})
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case i%4 == 0 && !errors.Is(err, boom):
			t.Fatalf("%d: %v, want boom", i, err)
		case i%4 != 0 && err != nil:
			t.Fatalf("%d: %v", i, err)
		case err == nil:
			ok++
		}
	}
	log, err := s.ReadLog(ctx, sess.ID, 0, 1000)
	if err != nil || len(log) != ok {
		t.Fatalf("%d entries for %d successful transactions (%v)", len(log), ok, err)
	}
	for i, e := range log {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", e.Seq, i)
		}
	}
	// Writes after Close fail cleanly.
	s.Close()
	if _, err := s.UpdateSession(ctx, sess.ID, func(store.Tx) error { return nil }); !errors.Is(err, sqlite.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestSynchronous(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts []sqlite.Option
		want int // PRAGMA synchronous: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
	}{
		{nil, 2},
		{[]sqlite.Option{sqlite.Synchronous("normal")}, 1},
		{[]sqlite.Option{sqlite.Synchronous("FULL")}, 2},
	} {
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sqlite.SynchronousLevel(s)
		s.Close()
		if err != nil || got != tc.want {
			t.Errorf("synchronous = %d (%v), want %d", got, err, tc.want)
		}
	}
	for _, opt := range []sqlite.Option{sqlite.Synchronous("sometimes"), sqlite.MaxBatch(0)} {
		if s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"), opt); err == nil {
			s.Close()
			t.Error("Open accepted an invalid option")
		}
	}
}
