// Package sqlite is the embedded store backend: one SQLite file in WAL mode
// (modernc.org/sqlite, no cgo). It is a driver of the shared store core
// (store/internal/sqlstore): this package holds only what is SQLite's own,
// the connections, the group commit of the single writer, the schema and
// the classification of errors. Writes go through a single connection, so
// transactions never contend and need no row locks; reads use a pool of
// their own.
// By default a write returns once its commit is synced to disk
// (synchronous=FULL), and transactions waiting at the same moment share one
// commit and its sync.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
)

// Store is a store.Store on a SQLite file.
type Store struct {
	*sqlstore.Store
	d *driver
}

var _ store.Store = (*Store)(nil)

// driver is the sqlstore.Driver of a SQLite file.
type driver struct {
	w *sql.DB // one connection: every write transaction
	r *sql.DB // readers

	wstmts, rstmts *stmtCache // the pools' prepared statements

	// Transactions go through one writer goroutine (writer.go) that
	// commits the transactions waiting at the same moment together (group
	// commit), each in a savepoint of its own.
	writes     chan *writeReq
	maxBatch   int
	quit, done chan struct{}

	mu     sync.RWMutex // held for reading while sending on writes; guards closed
	closed bool
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
	busyTimeout int // milliseconds
	queue       int // the writer's queue length
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
	o := options{synchronous: "FULL", maxBatch: defaultMaxBatch, busyTimeout: 10000, queue: 256}
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
	for _, p := range []string{"journal_mode(WAL)", "synchronous(" + o.synchronous + ")", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout), "foreign_keys(1)"} {
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
	for _, p := range []string{fmt.Sprintf("busy_timeout(%d)", o.busyTimeout), "query_only(1)"} {
		qr.Add("_pragma", p)
	}
	r, err := sql.Open("sqlite", "file:"+path+"?"+qr.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	d := &driver{w: w, r: r, wstmts: newStmtCache(w), rstmts: newStmtCache(r), writes: make(chan *writeReq, o.queue), maxBatch: o.maxBatch, quit: make(chan struct{}), done: make(chan struct{})}
	go d.writer()
	return &Store{Store: sqlstore.New(d), d: d}, nil
}

// Close stops the writer (failing what still waits) and closes both pools.
func (d *driver) Close() error {
	d.mu.Lock()
	already := d.closed
	d.closed = true
	d.mu.Unlock()
	if !already {
		close(d.quit)
		<-d.done
	}
	return errors.Join(d.rstmts.close(), d.wstmts.close(), d.r.Close(), d.w.Close())
}

// Reader implements sqlstore.Driver.
func (d *driver) Reader() sqlstore.Querier { return conn{db: d.r, stmts: d.rstmts} }

// Lock implements sqlstore.Driver: the single writer runs one transaction
// at a time, so reads need no locks.
func (d *driver) Lock(sqlstore.Lock) string { return "" }

// Now implements sqlstore.Driver: SQLite's clock is the host's, which is
// the one process's (millisecond precision).
func (d *driver) Now() string {
	return `CAST((julianday('now') - 2440587.5) * 86400000000000 AS INTEGER)`
}

// IsUnique implements sqlstore.Driver: SQLite's extended result codes of
// a UNIQUE or PRIMARY KEY constraint (never the message, which a trigger
// or a caller's error may word the same).
func (d *driver) IsUnique(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return true
	}
	return false
}

// Transient implements sqlstore.Driver: a disk full (SQLITE_FULL) is
// ErrFull; an I/O error, or the file locked past the busy timeout, is
// ErrUnavailable.
func (d *driver) Transient(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return nil
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return store.ErrFull
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY:
		return store.ErrUnavailable
	}
	return nil
}

// conn is a sqlstore.Querier on a *sql.DB or a *sql.Tx; with stmts, its
// statements run prepared, from that cache.
type conn struct {
	db interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
	stmts *stmtCache
}

// querier is what runs query: its prepared statement, else c's pool.
func (c conn) querier(ctx context.Context, query string) (q interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, args ...any) *sql.Row
}, ok bool) {
	if c.stmts == nil {
		return nil, false
	}
	if s := c.stmts.get(ctx, query); s != nil {
		return s, true
	}
	return nil, false
}

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if s, ok := c.querier(ctx, query); ok {
		res, err = s.ExecContext(ctx, args...)
	} else {
		res, err = c.db.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if s, ok := c.querier(ctx, query); ok {
		return s.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

func (c conn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if s, ok := c.querier(ctx, query); ok {
		return s.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, query, args...)
}
