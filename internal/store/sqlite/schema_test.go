package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// TestRefusesNewerSchema: a database a newer reins migrated (a recorded
// version beyond the last this binary knows) is refused, naming both
// versions, and left as it was.
func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reins.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	known := sqlite.SchemaVersion()
	if known < 21 {
		t.Fatalf("SchemaVersion() = %d, want the last embedded migration", known)
	}
	newer := known + 7
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, newer); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = sqlite.Open(ctx, path)
	var tooNew *store.SchemaTooNewError
	if !errors.As(err, &tooNew) {
		t.Fatalf("Open on a newer schema: %v, want a SchemaTooNewError", err)
	}
	if tooNew.Database != newer || tooNew.Binary != known {
		t.Fatalf("error names %d and %d, want %d and %d", tooNew.Database, tooNew.Binary, newer, known)
	}
	for _, v := range []int{newer, known} {
		if !strings.Contains(err.Error(), fmt.Sprintf("version %d", v)) {
			t.Fatalf("error %q does not name version %d", err, v)
		}
	}
}
