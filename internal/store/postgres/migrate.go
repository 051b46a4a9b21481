package postgres

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the key of the advisory lock that serialises migrations
// of replicas starting together.
const migrationLock = 0x7265696e73 // "reins"

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
// migration not yet recorded in schema_migrations. Each transaction first
// takes an advisory lock, so concurrent replicas apply each migration once.
// A database with a migration recorded beyond the last one this binary
// knows is refused first, with a *store.SchemaTooNewError: applying the
// missing older versions one by one would not notice it otherwise.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return refuseNewer(ctx, tx, latest)
	}); err != nil {
		return err
	}
	for _, m := range ms {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return apply(ctx, tx, m)
		}); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// refuseNewer fails with a *store.SchemaTooNewError when the database
// records a migration beyond latest.
func refuseNewer(ctx context.Context, tx pgx.Tx, latest int) error {
	if err := prepare(ctx, tx); err != nil {
		return err
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > latest {
		return &store.SchemaTooNewError{Database: current, Binary: latest}
	}
	return nil
}

// prepare takes the migrations' advisory lock for the transaction and
// creates schema_migrations if needed.
func prepare(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version bigint PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	return nil
}

// apply runs one migration in tx unless it is already recorded.
func apply(ctx context.Context, tx pgx.Tx, m sqlstore.Migration) error {
	if err := prepare(ctx, tx); err != nil {
		return err
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&done); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if done {
		return nil
	}
	// The simple protocol runs the several statements of a file at once.
	if _, err := tx.Conn().PgConn().Exec(ctx, m.SQL).ReadAll(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, m.Version, time.Now().UnixNano())
	return err
}
