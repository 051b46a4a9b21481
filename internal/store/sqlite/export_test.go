package sqlite

import (
	"context"
	"database/sql"

	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
)

// SynchronousLevel reads the writer connection's synchronous pragma.
func SynchronousLevel(s *Store) (int, error) {
	var n int
	err := s.d.w.QueryRow(`PRAGMA synchronous`).Scan(&n)
	return n, err
}

// BusyTimeout sets how long the store's statements wait for a lock
// another connection holds, in milliseconds (10,000 by default).
func BusyTimeout(ms int) Option { return func(o *options) { o.busyTimeout = ms } }

// QueueLen sets the length of the writer's queue (256 by default).
func QueueLen(n int) Option { return func(o *options) { o.queue = n } }

// Queued returns the number of transactions waiting in the writer's queue.
func Queued(s *Store) int { return len(s.d.writes) }

// WithTx runs fn as one of the writer's transactions.
func WithTx(ctx context.Context, s *Store, fn func(sqlstore.Querier) error) error {
	return s.d.WithTx(ctx, fn)
}

// TxOf returns the transaction under a Querier of WithTx.
func TxOf(q sqlstore.Querier) *sql.Tx { return q.(txConn).tx }

// StatementCounts returns how many statements the writer's and the
// readers' caches keep, and how many each prepared.
func StatementCounts(s *Store) (writerKept, writerPrepared, readerKept, readerPrepared int) {
	writerKept, writerPrepared = s.d.wstmts.counts()
	readerKept, readerPrepared = s.d.rstmts.counts()
	return
}

// LimitStatements bounds the statements each cache keeps to n.
func LimitStatements(s *Store, n int) {
	s.d.wstmts.mu.Lock()
	s.d.wstmts.max = n
	s.d.wstmts.mu.Unlock()
	s.d.rstmts.mu.Lock()
	s.d.rstmts.max = n
	s.d.rstmts.mu.Unlock()
}

// Reader is the store's readers' Querier.
func Reader(s *Store) sqlstore.Querier { return s.d.Reader() }
