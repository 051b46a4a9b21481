package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
)

// classified is a Driver whose errors, where the driver calls them
// transient (Driver.Transient), match store.ErrUnavailable or
// store.ErrFull: the one place where a driver's errors become the store's
// sentinels, for every statement and transaction.
type classified struct{ Driver }

// WithTx implements Driver.
func (c classified) WithTx(ctx context.Context, fn func(Querier) error) error {
	return c.wrap(c.Driver.WithTx(ctx, fn))
}

// Reader implements Driver.
func (c classified) Reader() Querier { return classifiedQuerier{c.Driver.Reader(), c} }

// wrap returns err wrapped in the sentinel the driver classifies it as.
func (c classified) wrap(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if sentinel := c.Transient(err); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

// classifiedQuerier is the reader of a classified Driver.
type classifiedQuerier struct {
	q Querier
	c classified
}

func (q classifiedQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	n, err := q.q.Exec(ctx, query, args...)
	return n, q.c.wrap(err)
}

func (q classifiedQuerier) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := q.q.Query(ctx, query, args...)
	if err != nil {
		return nil, q.c.wrap(err)
	}
	return classifiedRows{rows, q.c}, nil
}

func (q classifiedQuerier) QueryRow(ctx context.Context, query string, args ...any) Row {
	return classifiedRow{q.q.QueryRow(ctx, query, args...), q.c}
}

type classifiedRows struct {
	Rows
	c classified
}

func (r classifiedRows) Scan(dest ...any) error { return r.c.wrap(r.Rows.Scan(dest...)) }
func (r classifiedRows) Err() error             { return r.c.wrap(r.Rows.Err()) }

type classifiedRow struct {
	Row
	c classified
}

func (r classifiedRow) Scan(dest ...any) error { return r.c.wrap(r.Row.Scan(dest...)) }
