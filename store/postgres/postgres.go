// Package postgres is the store backend for PostgreSQL (pgx, one pool). Any
// number of replicas may share one database: every mutation of a session
// locks the session row, so sequence numbers stay gap-free and unique.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinsdev/reins/store"
)

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
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
	return &Store{pool: pool}, nil
}

// Close closes the connection pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// querier is what pgx.Tx and *pgxpool.Pool have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// withTx runs fn in a transaction, committed if fn returns nil.
func (s *Store) withTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func notFound(err error, what, id string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s %s: %w", what, id, store.ErrNotFound)
	}
	return err
}

func unixOf(rfc string) int64 {
	t, err := time.Parse(time.RFC3339Nano, rfc)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}

func nsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func timePtr(ns *int64) *time.Time {
	if ns == nil {
		return nil
	}
	t := time.Unix(0, *ns).UTC()
	return &t
}

// query builds a WHERE clause with numbered placeholders.
type query struct {
	where []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func (q *query) and(cond string) { q.where = append(q.where, cond) }

func (q *query) clause() string {
	if len(q.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(q.where, " AND ")
}

// page adds the keyset conditions of l on column col and returns the WHERE,
// ORDER BY and LIMIT clauses.
func (q *query) page(col string, l store.ListQuery) string {
	if l.After > 0 {
		op := " > "
		if l.Desc {
			op = " < "
		}
		q.and(col + op + q.arg(l.After))
	}
	if l.Before > 0 {
		op := " < "
		if l.Desc {
			op = " > "
		}
		q.and(col + op + q.arg(l.Before))
	}
	desc := l.Desc
	// Before pages are read in the reverse direction; callers flip them.
	if backwards(l) {
		desc = !desc
	}
	dir := "ASC"
	if desc {
		dir = "DESC"
	}
	limit := l.Limit
	if limit <= 0 {
		limit = 20
	}
	return q.clause() + fmt.Sprintf(" ORDER BY %s %s LIMIT %d", col, dir, limit)
}

// backwards reports whether a page of l is read in reverse list order.
func backwards(l store.ListQuery) bool { return l.Before > 0 && l.After == 0 }

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// listItems runs a list query whose rows are (pos, JSON body) and decodes
// the bodies; pages read backwards are put back in list order.
func listItems[T any](ctx context.Context, db querier, sql string, args []any, l store.ListQuery) ([]store.Item[T], error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Item[T]
	for rows.Next() {
		var it store.Item[T]
		var body []byte
		if err := rows.Scan(&it.Pos, &body); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(body, &it.Value); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if backwards(l) {
		reverse(out)
	}
	return out, nil
}

// getJSON reads one JSON body and decodes it into v.
func getJSON(ctx context.Context, db querier, v any, sql string, args ...any) error {
	var body []byte
	if err := db.QueryRow(ctx, sql, args...).Scan(&body); err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}
