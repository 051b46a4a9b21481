// Package postgres is the store backend for PostgreSQL (pgx, one pool). It
// is a driver of the shared store core (store/internal/sqlstore): this
// package holds only what is PostgreSQL's own, the pool, numbered
// placeholders, row locks, the schema and the classification of errors.
//
// Every mutation of a session locks the session row, so sequence numbers
// stay gap-free and unique even when two processes write to one database,
// and the sessions' leases (store.Leases) expire by the server's clock, so
// that several replicas agree on who runs a session whatever their own
// clocks say.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
)

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	*sqlstore.Store
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at dsn (a PostgreSQL URL or keyword/value
// string) and applies pending migrations.
func Open(ctx context.Context, dsn string) (*Store, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	return &Store{sqlstore.New(driver{pool})}, nil
}

// driver is the sqlstore.Driver of a PostgreSQL pool.
type driver struct {
	pool *pgxpool.Pool
}

// Reader implements sqlstore.Driver.
func (d driver) Reader() sqlstore.Querier { return conn{d.pool} }

// WithTx implements sqlstore.Driver.
func (d driver) WithTx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(conn{tx}) })
}

// Lock implements sqlstore.Driver.
func (d driver) Lock(l sqlstore.Lock) string {
	switch l {
	case sqlstore.LockShare:
		return " FOR SHARE"
	case sqlstore.LockClaim:
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// Now implements sqlstore.Driver: the server's clock, read when the
// statement runs (not when its transaction began), so that every replica
// measures leases by the same clock.
func (d driver) Now() string {
	return `(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint`
}

// IsUnique implements sqlstore.Driver.
func (d driver) IsUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// Transient implements sqlstore.Driver: a connection lost, refused or
// cut by the server (SQLSTATE class 08, 57P01-57P03 as the server shuts
// down, restarts or is told to end the backend, 53300 when it has no
// connection left) is ErrUnavailable, and so is a lock waited for past
// lock_timeout (55P03, as SQLite's SQLITE_BUSY); a full disk (53100) is
// ErrFull. The end of the caller's context is neither.
func (d driver) Transient(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return store.ErrFull
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", pe.Code == "53300", pe.Code == "55P03":
			return store.ErrUnavailable
		}
		return nil
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) || pgconn.SafeToRetry(err) {
		return store.ErrUnavailable
	}
	return nil
}

// Close implements sqlstore.Driver.
func (d driver) Close() error {
	d.pool.Close()
	return nil
}

// conn is a sqlstore.Querier on the pool or a transaction: it numbers the
// store's ? placeholders.
type conn struct {
	db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.db.Exec(ctx, numbered(query), args...)
	return tag.RowsAffected(), err
}

func (c conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := c.db.Query(ctx, numbered(query), args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

func (c conn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return c.db.QueryRow(ctx, numbered(query), args...)
}

// pgRows is pgx.Rows with the Close of database/sql.
type pgRows struct{ pgx.Rows }

func (r pgRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}

// numbered rewrites the ? placeholders of query as $1, $2, ... The store's
// statements have no ? anywhere else (no string literals, no jsonb
// operators).
func numbered(query string) string {
	n := strings.Count(query, "?")
	if n == 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 2*n)
	i := 0
	for {
		j := strings.IndexByte(query, '?')
		if j < 0 {
			b.WriteString(query)
			return b.String()
		}
		i++
		b.WriteString(query[:j])
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(i))
		query = query[j+1:]
	}
}
