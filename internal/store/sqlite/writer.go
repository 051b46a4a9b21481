package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
)

// writeReq is a transaction waiting for the writer.
type writeReq struct {
	ctx   context.Context
	fn    func(*sql.Tx) error
	state atomic.Int32 // reqQueued, then reqRunning (the writer's) or reqAbandoned (the caller's)
	done  chan error   // the outcome; buffered, so the writer never waits for the caller
}

// The states of a writeReq: whichever of the writer and the caller moves
// it out of reqQueued first decides whether it runs.
const (
	reqQueued int32 = iota
	reqRunning
	reqAbandoned
)

// claim moves r to running; false if its caller gave up on it.
func (r *writeReq) claim() bool { return r.state.CompareAndSwap(reqQueued, reqRunning) }

// abandon moves r to abandoned; false if the writer has started it.
func (r *writeReq) abandon() bool { return r.state.CompareAndSwap(reqQueued, reqAbandoned) }

// WithTx implements sqlstore.Driver. fn may be committed together with
// other transactions; if it fails, only its own changes are undone.
//
// If ctx ends while the transaction waits for the writer, WithTx returns
// ctx.Err() at once and the transaction never runs. Once the writer has
// started it, WithTx waits for its outcome, which says what happened: its
// statements fail once ctx is done, and a transaction whose ctx ended
// before its savepoint was released is undone and fails with ctx.Err();
// nil means it was committed, even if ctx ended during the commit.
func (d *driver) WithTx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &writeReq{ctx: ctx, fn: func(tx *sql.Tx) error { return fn(txConn{tx: tx, stmts: d.wstmts}) }, done: make(chan error, 1)}
	if err := d.enqueue(ctx, req); err != nil {
		return err
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		if req.abandon() {
			return ctx.Err() // the writer skips it
		}
		return <-req.done
	}
}

// enqueue hands req to the writer, unless the store is closed or ctx ends
// while the queue is full.
func (d *driver) enqueue(ctx context.Context, req *writeReq) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	select {
	case d.writes <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writer commits the queued transactions, in batches of those waiting at
// the same moment, until Close.
func (d *driver) writer() {
	defer close(d.done)
	for {
		var first *writeReq
		select {
		case first = <-d.writes:
		case <-d.quit:
			for {
				select {
				case r := <-d.writes:
					r.done <- ErrClosed
				default:
					return
				}
			}
		}
		batch := []*writeReq{first}
	fill:
		for len(batch) < d.maxBatch {
			select {
			case r := <-d.writes:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		d.commit(batch)
		// The connection is free: prepare what the batch ran unprepared.
		d.wstmts.prepareNoted(context.Background())
	}
}

// commit runs a batch in one transaction, each request in a savepoint,
// and tells each request its outcome.
func (d *driver) commit(batch []*writeReq) {
	results := make([]error, len(batch))
	defer func() {
		for i, r := range batch {
			r.done <- results[i]
		}
	}()
	tx, err := d.w.BeginTx(context.Background(), nil)
	if err != nil {
		for i := range results {
			results[i] = fmt.Errorf("begin: %w", err)
		}
		return
	}
	ok := 0
	var cause error // the first disk-full or I/O failure of the batch
	for i, r := range batch {
		if !r.claim() {
			results[i] = r.ctx.Err()
			continue
		}
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		err, broken := runSavepoint(tx, r)
		results[i] = err
		if err != nil && cause == nil && d.Transient(err) != nil {
			cause = err
		}
		if broken != nil {
			// The transaction is unusable, or in a state nobody knows
			// (SQLite rolls a transaction back itself after some
			// failures): nothing of the batch is committed.
			failBatch(results, batchFailure("batch undone", cause, errors.Join(broken, rollback(tx))))
			return
		}
		if err == nil {
			ok++
		}
	}
	if ok == 0 {
		if err := rollback(tx); err != nil {
			for i := range results {
				results[i] = errors.Join(results[i], err)
			}
		}
		return
	}
	if err := tx.Commit(); err != nil {
		failBatch(results, batchFailure("commit", cause, err))
	}
}

// runSavepoint runs r in a savepoint of tx: err is r's outcome (nil: its changes
// are in tx), broken an error of the savepoint's own statements, after
// which tx must not be used.
func runSavepoint(tx *sql.Tx, r *writeReq) (err, broken error) {
	if _, err := tx.Exec(`SAVEPOINT w`); err != nil {
		return fmt.Errorf("savepoint: %w", err), fmt.Errorf("savepoint: %w", err)
	}
	err = r.fn(tx)
	if err == nil {
		err = r.ctx.Err() // its caller is told it failed: undo it
	}
	if err != nil {
		if _, rerr := tx.Exec(`ROLLBACK TO w`); rerr != nil {
			return err, fmt.Errorf("rollback to savepoint: %w", rerr)
		}
	}
	if _, rerr := tx.Exec(`RELEASE w`); rerr != nil {
		return err, fmt.Errorf("release savepoint: %w", rerr)
	}
	return err, nil
}

// rollback rolls tx back; a transaction SQLite already ended is no error.
func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// failBatch gives err to every request of a failed batch that has no error
// of its own: none of them was committed.
func failBatch(results []error, err error) {
	for i := range results {
		if results[i] == nil {
			results[i] = err
		}
	}
}

// batchFailure is the error of a transaction that failed with the batch
// it was committed in: what failed, and the batch's earlier disk-full or
// I/O failure (cause) that may have made it fail, so that it is
// classified with it.
func batchFailure(what string, cause, err error) error {
	if cause != nil {
		return fmt.Errorf("%s after %w: %w", what, cause, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// txConn is a sqlstore.Querier in the writer's transaction. A statement
// whose context is done fails before it starts, but a statement that has
// started is never interrupted: SQLite answers an interrupted write by
// rolling back the whole transaction, which holds the other requests of
// the batch too. A statement the writer has prepared runs prepared; any
// other is noted for the writer to prepare after the batch.
type txConn struct {
	tx    *sql.Tx
	stmts *stmtCache
}

// on is what runs query in the transaction: its prepared statement, or
// the transaction itself (ok false).
func (c txConn) on(ctx context.Context, query string) (s *sql.Stmt, ok bool) {
	if c.stmts == nil {
		return nil, false
	}
	if ps := c.stmts.lookup(query); ps != nil {
		return c.tx.StmtContext(ctx, ps), true
	}
	c.stmts.note(query)
	return nil, false
}

func (c txConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ctx = context.WithoutCancel(ctx)
	var res sql.Result
	var err error
	if s, ok := c.on(ctx, query); ok {
		res, err = s.ExecContext(ctx, args...)
	} else {
		res, err = c.tx.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c txConn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if s, ok := c.on(ctx, query); ok {
		return s.QueryContext(ctx, args...)
	}
	return c.tx.QueryContext(ctx, query, args...)
}

func (c txConn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if err := ctx.Err(); err != nil {
		return errRow{err}
	}
	ctx = context.WithoutCancel(ctx)
	if s, ok := c.on(ctx, query); ok {
		return s.QueryRowContext(ctx, args...)
	}
	return c.tx.QueryRowContext(ctx, query, args...)
}

// errRow is a Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
