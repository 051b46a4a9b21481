package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SchemaVersion returns the version of the last migration this binary
// knows: a database recorded beyond it is refused by Open.
func SchemaVersion() int {
	ms, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil || len(ms) == 0 {
		return 0 // the embedded files are checked by the tests
	}
	return ms[len(ms)-1].Version
}

// migrate applies, in order and each in its own transaction, every embedded
// migration newer than the schema's recorded version. A schema recorded
// beyond the last migration it knows is refused with a
// *store.SchemaTooNewError.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	ms, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		return err
	}
	if latest := ms[len(ms)-1].Version; current > latest {
		return &store.SchemaTooNewError{Database: current, Binary: latest}
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if err := apply(ctx, db, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// apply runs one migration and records it, in one transaction.
func apply(ctx context.Context, db *sql.DB, m sqlstore.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.Version, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}
