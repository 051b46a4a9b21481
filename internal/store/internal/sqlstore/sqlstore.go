// Package sqlstore is the one implementation of store.Store over SQL. Every
// rule of the store lives here once: the read-modify-write transactions of
// agents, environments, vaults, credentials, work items and sessions, the
// uniqueness checks, list paging, the event log (echoes superseding older
// entries, the pending queue) and the running-tool marks. What differs
// between databases (connections, transactions, placeholders, row locks,
// error classification, migrations) is a Driver's business: store/sqlite
// and store/postgres are drivers around this package.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// Store is a store.Store over a Driver.
type Store struct {
	d Driver
	r Querier
}

var _ store.Store = (*Store)(nil)

// New returns a Store on d; closing the Store closes d.
func New(d Driver) *Store {
	c := classified{d}
	return &Store{d: c, r: c.Reader()}
}

// CheckWrite implements store.Store: it commits a write of one row (the
// time of the check, in the settings).
func (s *Store) CheckWrite(ctx context.Context) error {
	_, err := s.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
		"write_check", time.Now().UTC().Format(time.RFC3339Nano))
	return err
}

// Close implements store.Store.
func (s *Store) Close() error { return s.d.Close() }

// lock returns the driver's locking clause for l.
func (s *Store) lock(l Lock) string { return s.d.Lock(l) }

// conflict turns a unique violation into a store.ErrConflict described by
// what; other errors are returned as they are.
func (s *Store) conflict(err error, what string) error {
	if s.d.IsUnique(err) {
		return fmt.Errorf("%s: %w", what, store.ErrConflict)
	}
	return err
}

// exec runs one statement in a write transaction and returns the number of
// rows it changed.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.d.WithTx(ctx, func(tx Querier) error {
		var err error
		n, err = tx.Exec(ctx, query, args...)
		return err
	})
	return n, err
}

func notFound(err error, what, id string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %s: %w", what, id, store.ErrNotFound)
	}
	return err
}

// unixOf converts an API timestamp to Unix nanoseconds (0 if malformed).
func unixOf(rfc string) int64 {
	t, err := time.Parse(time.RFC3339Nano, rfc)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}

// nsPtr is t in Unix nanoseconds, or NULL.
func nsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// timePtr is the inverse of nsPtr.
func timePtr(ns *int64) *time.Time {
	if ns == nil {
		return nil
	}
	t := time.Unix(0, *ns).UTC()
	return &t
}

// query builds a WHERE clause.
type query struct {
	where []string
	args  []any
}

// and adds a condition and its arguments.
func (q *query) and(cond string, args ...any) {
	q.where = append(q.where, cond)
	q.args = append(q.args, args...)
}

// in adds "col IN (...)" for vals.
func (q *query) in(col string, vals []string) {
	q.and(col + " IN (?" + strings.Repeat(", ?", len(vals)-1) + ")")
	for _, v := range vals {
		q.args = append(q.args, v)
	}
}

// since adds the bounds of a time range on col.
func (q *query) since(col string, gt, gte, lt, lte *time.Time) {
	for _, b := range []struct {
		t  *time.Time
		op string
	}{{gt, ">"}, {gte, ">="}, {lt, "<"}, {lte, "<="}} {
		if b.t != nil {
			q.and(col+" "+b.op+" ?", b.t.UnixNano())
		}
	}
}

// clause returns the WHERE clause ("" without conditions).
func (q *query) clause() string {
	if len(q.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(q.where, " AND ")
}

// page adds the keyset conditions of l on column col and returns the WHERE,
// ORDER BY and LIMIT clauses.
func (q *query) page(col string, l store.ListQuery) string {
	less, more := " < ?", " > ?"
	if l.Desc {
		less, more = more, less
	}
	if l.After > 0 {
		q.and(col+more, l.After)
	}
	if l.Before > 0 {
		q.and(col+less, l.Before)
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

// collect runs a query and scans each row with scan.
func collect[T any](ctx context.Context, db Querier, scan func(Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// list runs sql with the conditions of q and the page l on the column col
// (see query.page), and puts a page read backwards back in list order.
func list[T any](ctx context.Context, db Querier, scan func(Row) (T, error), sql, col string, q *query, l store.ListQuery) ([]T, error) {
	out, err := collect(ctx, db, scan, sql+q.page(col, l), q.args...)
	if err == nil && backwards(l) {
		slices.Reverse(out)
	}
	return out, err
}

// scanItem scans a row (pos, JSON body) into an Item.
func scanItem[T any](rows Row) (store.Item[T], error) {
	var it store.Item[T]
	var body []byte
	if err := rows.Scan(&it.Pos, &body); err != nil {
		return it, err
	}
	err := json.Unmarshal(body, &it.Value)
	return it, err
}

// scanJSON scans a row (JSON body) into a T.
func scanJSON[T any](row Row) (T, error) {
	var v T
	var body []byte
	if err := row.Scan(&body); err != nil {
		return v, err
	}
	err := json.Unmarshal(body, &v)
	return v, err
}

func scanString(rows Row) (string, error) {
	var v string
	err := rows.Scan(&v)
	return v, err
}
