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
