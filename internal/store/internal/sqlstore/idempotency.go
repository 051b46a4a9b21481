package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// RecordOutcome implements store.Tx.
func (t *sessionTx) RecordOutcome(o store.IdempotentOutcome, since time.Time) error {
	o.SessionID = t.sess.ID
	return recordOutcome(t.ctx, t.tx, o, since)
}

// recordOutcome is the one write of an outcome, in the transaction tx:
// the record is inserted, or replaces one of the key made before since;
// store.ErrKeyRecorded when the key is held.
func recordOutcome(ctx context.Context, tx Querier, o store.IdempotentOutcome, since time.Time) error {
	var response any
	if o.Response != nil {
		response = string(o.Response)
	}
	n, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (scope, idempotency_key, request_hash, session_id, status, response, first_seq, last_seq, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, idempotency_key) DO UPDATE SET request_hash = excluded.request_hash, session_id = excluded.session_id,
			status = excluded.status, response = excluded.response, first_seq = excluded.first_seq, last_seq = excluded.last_seq,
			created_at = excluded.created_at
		WHERE idempotency_keys.created_at < ?`,
		o.Scope, o.Key, o.RequestHash, o.SessionID, o.Status, response, o.FirstSeq, o.LastSeq, o.CreatedAt.UnixNano(), since.UnixNano())
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("idempotency key %q: %w", o.Key, store.ErrKeyRecorded)
	}
	return nil
}

// recordOutcomeOf records the outcome of ctx's store.WithOutcome, if any,
// in tx.
func recordOutcomeOf(ctx context.Context, tx Querier) error {
	o, since, ok := store.OutcomeFrom(ctx)
	if !ok {
		return nil
	}
	return recordOutcome(ctx, tx, o, since)
}

// IdempotentOutcome implements store.Idempotency.
func (s *Store) IdempotentOutcome(ctx context.Context, scope, key string, since time.Time) (store.IdempotentOutcome, error) {
	o := store.IdempotentOutcome{Scope: scope, Key: key}
	var response *string
	var created int64
	err := s.r.QueryRow(ctx, `SELECT request_hash, session_id, status, response, first_seq, last_seq, created_at FROM idempotency_keys
		WHERE scope = ? AND idempotency_key = ? AND created_at >= ?`, scope, key, since.UnixNano()).
		Scan(&o.RequestHash, &o.SessionID, &o.Status, &response, &o.FirstSeq, &o.LastSeq, &created)
	if err != nil {
		return o, notFound(err, "idempotency key", key)
	}
	if response != nil {
		o.Response = []byte(*response)
	}
	o.CreatedAt = time.Unix(0, created).UTC()
	return o, nil
}

// ForgetOutcomes implements store.Idempotency.
func (s *Store) ForgetOutcomes(ctx context.Context, before time.Time) (int64, error) {
	return s.exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < ?`, before.UnixNano())
}
