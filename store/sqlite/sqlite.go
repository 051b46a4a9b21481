// Package sqlite is the embedded store backend: one SQLite file in WAL mode
// (modernc.org/sqlite, no cgo). Writes go through a single connection, so
// transactions never contend; reads use a pool of their own.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/reinsdev/reins/store"
)

// Store is a store.Store on a SQLite file.
type Store struct {
	w *sql.DB // one connection: every write transaction
	r *sql.DB // readers
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and applies pending
// migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(NORMAL)", "busy_timeout(10000)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	qr := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "query_only(1)"} {
		qr.Add("_pragma", p)
	}
	r, err := sql.Open("sqlite", "file:"+path+"?"+qr.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	return &Store{w: w, r: r}, nil
}

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// withTx runs fn in a write transaction.
func (s *Store) withTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func notFound(err error, what, id string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %s: %w", what, id, store.ErrNotFound)
	}
	return err
}

// page appends the keyset conditions of q on column col and returns the
// ORDER BY and LIMIT clause.
func page(where []string, args []any, col string, q store.ListQuery) ([]string, []any, string) {
	if q.After > 0 {
		if q.Desc {
			where = append(where, col+" < ?")
		} else {
			where = append(where, col+" > ?")
		}
		args = append(args, q.After)
	}
	if q.Before > 0 {
		if q.Desc {
			where = append(where, col+" > ?")
		} else {
			where = append(where, col+" < ?")
		}
		args = append(args, q.Before)
	}
	dir := "ASC"
	if q.Desc {
		dir = "DESC"
	}
	// Before pages are read in the reverse direction; callers flip them.
	if q.Before > 0 && q.After == 0 {
		if dir == "ASC" {
			dir = "DESC"
		} else {
			dir = "ASC"
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	return where, args, fmt.Sprintf(" ORDER BY %s %s LIMIT %d", col, dir, limit)
}

func whereClause(where []string) string {
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// listItems runs a list query whose rows are (pos, JSON body) and decodes
// the bodies; pages read backwards (Before) are put back in list order.
func listItems[T any](ctx context.Context, db *sql.DB, query string, args []any, q store.ListQuery) ([]store.Item[T], error) {
	rows, err := db.QueryContext(ctx, query, args...)
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
	if q.Before > 0 && q.After == 0 {
		reverse(out)
	}
	return out, rows.Err()
}
