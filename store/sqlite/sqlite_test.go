package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/reinsdev/reins/store"
	"github.com/reinsdev/reins/store/sqlite"
	"github.com/reinsdev/reins/store/storetest"
)

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
