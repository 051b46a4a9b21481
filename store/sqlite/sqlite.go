// Package sqlite is the embedded store backend: one SQLite file in WAL mode
// (modernc.org/sqlite, no cgo). Writes go through a single connection, so
// transactions never contend; reads use a pool of their own. By default a
// write returns once its commit is synced to disk (synchronous=FULL), and
// transactions waiting at the same moment share one commit and its sync.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/reinsdev/reins/store"
)

// Store is a store.Store on a SQLite file.
type Store struct {
	w *sql.DB // one connection: every write transaction
	r *sql.DB // readers

	// Transactions go through one writer goroutine that commits the
	// transactions waiting at the same moment together (group commit),
	// each in a savepoint of its own.
	writes     chan *writeReq
	maxBatch   int
	mu         sync.RWMutex // held for reading while sending on writes
	closed     bool
	quit, done chan struct{}
}

// writeReq is a transaction waiting for the writer.
type writeReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	done chan error
}

// defaultMaxBatch bounds the transactions committed together.
const defaultMaxBatch = 64

// ErrClosed is returned for writes on a closed store.
var ErrClosed = errors.New("sqlite: store closed")

var _ store.Store = (*Store)(nil)

// An Option tunes Open.
type Option func(*options)

type options struct {
	synchronous string
	maxBatch    int
}

// Synchronous sets SQLite's synchronous pragma: "FULL" (the default) syncs
// the write-ahead log at every commit, so a write acknowledged to a client
// survives a power loss or an operating-system crash; "NORMAL" syncs only
// at checkpoints, so such a crash may roll back the last acknowledged
// commits (never corrupting the database; a crash of the process alone
// loses nothing either way). "OFF" and "EXTRA" are accepted too.
func Synchronous(mode string) Option {
	return func(o *options) { o.synchronous = mode }
}

// MaxBatch bounds the transactions committed together (64 by default);
// 1 commits each transaction alone, which disables group commit.
func MaxBatch(n int) Option {
	return func(o *options) { o.maxBatch = n }
}

// Open opens (creating if needed) the database at path and applies pending
// migrations.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{synchronous: "FULL", maxBatch: defaultMaxBatch}
	for _, opt := range opts {
		opt(&o)
	}
	o.synchronous = strings.ToUpper(o.synchronous)
	switch o.synchronous {
	case "OFF", "NORMAL", "FULL", "EXTRA":
	default:
		return nil, fmt.Errorf("sqlite: synchronous %q: want OFF, NORMAL, FULL or EXTRA", o.synchronous)
	}
	if o.maxBatch < 1 {
		return nil, fmt.Errorf("sqlite: max batch %d: want at least 1", o.maxBatch)
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(" + o.synchronous + ")", "busy_timeout(10000)", "foreign_keys(1)"} {
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
	s := &Store{w: w, r: r, writes: make(chan *writeReq, 256), maxBatch: o.maxBatch, quit: make(chan struct{}), done: make(chan struct{})}
	go s.writer()
	return s, nil
}

// Close stops the writer (failing what still waits) and closes both pools.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if !already {
		close(s.quit)
		<-s.done
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// withTx runs fn in a write transaction. fn may be committed together with
// other transactions; if it fails, only its own changes are undone.
func (s *Store) withTx(ctx context.Context, fn func(*sql.Tx) error) error {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	s.writes <- req
	s.mu.RUnlock()
	// Wait even if ctx ends: the transaction may already be committed.
	return <-req.done
}

func (s *Store) writer() {
	defer close(s.done)
	for {
		var first *writeReq
		select {
		case first = <-s.writes:
		case <-s.quit:
			for {
				select {
				case r := <-s.writes:
					r.done <- ErrClosed
				default:
					return
				}
			}
		}
		batch := []*writeReq{first}
	fill:
		for len(batch) < s.maxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.commit(batch)
	}
}

// commit runs a batch in one transaction, each request in a savepoint.
func (s *Store) commit(batch []*writeReq) {
	results := make([]error, len(batch))
	finish := func() {
		for i, r := range batch {
			r.done <- results[i]
		}
	}
	defer finish()
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		for i := range results {
			results[i] = fmt.Errorf("begin: %w", err)
		}
		return
	}
	ok := 0
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if _, err := tx.Exec(`SAVEPOINT w`); err != nil {
			results[i] = fmt.Errorf("savepoint: %w", err)
			continue
		}
		if err := r.fn(tx); err != nil {
			results[i] = err
			if _, rerr := tx.Exec(`ROLLBACK TO w`); rerr != nil {
				// The transaction is unusable: fail the whole batch.
				tx.Rollback()
				for j := range results {
					if results[j] == nil {
						results[j] = fmt.Errorf("rollback to savepoint: %w", rerr)
					}
				}
				return
			}
		} else {
			ok++
		}
		tx.Exec(`RELEASE w`)
	}
	if ok == 0 {
		tx.Rollback()
		return
	}
	if err := tx.Commit(); err != nil {
		for i := range results {
			if results[i] == nil {
				results[i] = fmt.Errorf("commit: %w", err)
			}
		}
	}
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
