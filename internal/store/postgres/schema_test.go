package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
)

// TestRefusesNewerSchema: PostgreSQL applies missing versions one by one,
// so a newer migration recorded next to all the known ones must still be
// refused, naming both versions.
func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	dsn := freshDB(t)
	open(t, dsn).Close()
	known := postgres.SchemaVersion()
	if known < 19 {
		t.Fatalf("SchemaVersion() = %d, want the last embedded migration", known)
	}
	newer := known + 7
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, newer); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	s, err := postgres.Open(ctx, dsn)
	if err == nil {
		s.Close()
	}
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
