package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/reinsdev/reins/store/sqlite"
	"github.com/reinsdev/reins/store/storetest"
)

func TestVaultConformance(t *testing.T) {
	storetest.RunVaults(t, func(t *testing.T) *sqlite.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
