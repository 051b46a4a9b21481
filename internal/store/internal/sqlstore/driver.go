package sqlstore

import "context"

// Driver is what one SQL database gives the store: where reads and write
// transactions run, and the few pieces of SQL that differ between dialects.
// The statements the store sends are written once, in the SQL that SQLite
// and PostgreSQL share, with ? placeholders; a driver whose database numbers
// its parameters rewrites them.
type Driver interface {
	// Reader runs reads outside a transaction.
	Reader() Querier
	// WithTx runs fn in a write transaction, committed if fn returns nil
	// and undone otherwise; fn's error is returned as is.
	WithTx(ctx context.Context, fn func(Querier) error) error
	// Lock returns the clause that ends a SELECT in a write transaction to
	// lock the rows it reads, or "" where write transactions never run
	// side by side.
	Lock(l Lock) string
	// Now returns an expression for the current time in Unix
	// nanoseconds by the database's clock; leases expire by it.
	Now() string
	// IsUnique reports whether err is a unique-constraint violation.
	IsUnique(err error) bool
	// Transient returns store.ErrUnavailable when err says the database
	// could not be reached (a connection lost or refused, the server
	// shutting down), store.ErrFull when its storage is full, and nil for
	// any other error. The store wraps such errors in the sentinel.
	Transient(err error) error
	// Close releases the driver's connections.
	Close() error
}

// Lock is how a read in a write transaction locks its rows.
type Lock int

// Locks.
const (
	// LockUpdate: the transaction writes the rows back.
	LockUpdate Lock = iota
	// LockShare: the rows must stay (not be deleted) until commit.
	LockShare
	// LockClaim: like LockUpdate, but rows another transaction holds are
	// skipped instead of waited for.
	LockClaim
)

// Querier runs statements on a connection pool or in a transaction.
type Querier interface {
	// Exec runs a statement and returns the number of rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Rows is the result of Query.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Row is the result of QueryRow. Scan returns an error matching
// sql.ErrNoRows when there was no row.
type Row interface {
	Scan(dest ...any) error
}
