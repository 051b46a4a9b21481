package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reinsdev/reins/store"
)

func writeWork(ctx context.Context, db querier, w store.WorkItem, insert bool) error {
	body, err := json.Marshal(w)
	if err != nil {
		return err
	}
	acked := w.AcknowledgedAt != nil
	if insert {
		_, err = db.Exec(ctx, `INSERT INTO work_items (id, environment_id, session_id, state, created_at, claimed_at, acknowledged, lease_expires_at, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			w.ID, w.EnvironmentID, w.SessionID, w.State, w.CreatedAt.UnixNano(), nsPtr(w.ClaimedAt), acked, nsPtr(w.LeaseExpiresAt), body)
		if isUnique(err) {
			return fmt.Errorf("work %s: %w", w.ID, store.ErrConflict)
		}
		return err
	}
	// Once acknowledged, always recorded as such (SessionWorkAcked).
	_, err = db.Exec(ctx, `UPDATE work_items SET state = $1, claimed_at = $2, acknowledged = acknowledged OR $3, lease_expires_at = $4, body = $5 WHERE id = $6`,
		w.State, nsPtr(w.ClaimedAt), acked, nsPtr(w.LeaseExpiresAt), body, w.ID)
	return err
}

// CreateWork implements store.Work.
func (s *Store) CreateWork(ctx context.Context, w store.WorkItem) error {
	return writeWork(ctx, s.pool, w, true)
}

func scanWork(row pgx.Row) (store.WorkItem, error) {
	var body []byte
	var w store.WorkItem
	if err := row.Scan(&body); err != nil {
		return w, err
	}
	err := json.Unmarshal(body, &w)
	return w, err
}

// GetWork implements store.Work.
func (s *Store) GetWork(ctx context.Context, environmentID, id string) (store.WorkItem, error) {
	w, err := scanWork(s.pool.QueryRow(ctx, `SELECT body FROM work_items WHERE id = $1 AND environment_id = $2`, id, environmentID))
	return w, notFound(err, "work", id)
}

// ListWork implements store.Work.
func (s *Store) ListWork(ctx context.Context, environmentID string, l store.ListQuery) ([]store.Item[store.WorkItem], error) {
	var q query
	q.and("environment_id = " + q.arg(environmentID))
	tail := q.page("pos", l)
	return listItems[store.WorkItem](ctx, s.pool, `SELECT pos, body FROM work_items`+tail, q.args, l)
}

// UpdateWork implements store.Work.
func (s *Store) UpdateWork(ctx context.Context, environmentID, id string, fn func(*store.WorkItem) error) (store.WorkItem, error) {
	var out store.WorkItem
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		w, err := scanWork(tx.QueryRow(ctx, `SELECT body FROM work_items WHERE id = $1 AND environment_id = $2 FOR UPDATE`, id, environmentID))
		if err != nil {
			return notFound(err, "work", id)
		}
		if err := fn(&w); err != nil {
			return err
		}
		out = w
		return writeWork(ctx, tx, w, false)
	})
	return out, err
}

// ClaimWork implements store.Work. Items another replica is claiming at the
// same moment are skipped, so each poll gets a different item.
func (s *Store) ClaimWork(ctx context.Context, environmentID, worker string, now, reclaimBefore time.Time) (store.WorkItem, error) {
	var out store.WorkItem
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		w, err := scanWork(tx.QueryRow(ctx, `SELECT body FROM work_items WHERE environment_id = $1 AND state = $2 AND (claimed_at IS NULL OR claimed_at < $3) ORDER BY pos LIMIT 1 FOR UPDATE SKIP LOCKED`,
			environmentID, store.WorkQueued, reclaimBefore.UnixNano()))
		if err != nil {
			return notFound(err, "queued work of environment", environmentID)
		}
		w.ClaimedAt, w.ClaimedBy = &now, worker
		out = w
		return writeWork(ctx, tx, w, false)
	})
	return out, err
}

// OpenWorkForSession implements store.Work.
func (s *Store) OpenWorkForSession(ctx context.Context, sessionID string) (store.WorkItem, error) {
	w, err := scanWork(s.pool.QueryRow(ctx, `SELECT body FROM work_items WHERE session_id = $1 AND state <> $2 ORDER BY pos DESC LIMIT 1`, sessionID, store.WorkStopped))
	return w, notFound(err, "open work of session", sessionID)
}

// SessionWorkAcked implements store.Work.
func (s *Store) SessionWorkAcked(ctx context.Context, sessionID string) (bool, error) {
	var acked bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM work_items WHERE session_id = $1 AND acknowledged)`, sessionID).Scan(&acked)
	return acked, err
}

// ExpiredWork implements store.Work.
func (s *Store) ExpiredWork(ctx context.Context, now time.Time) ([]store.WorkItem, error) {
	rows, err := s.pool.Query(ctx, `SELECT body FROM work_items WHERE state = ANY($1) AND lease_expires_at IS NOT NULL AND lease_expires_at < $2 ORDER BY pos`,
		[]string{store.WorkStarting, store.WorkActive, store.WorkStopping}, now.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.WorkItem
	for rows.Next() {
		w, err := scanWork(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// WorkStats implements store.Work.
func (s *Store) WorkStats(ctx context.Context, environmentID string) (store.WorkStats, error) {
	var st store.WorkStats
	var oldest *int64
	err := s.pool.QueryRow(ctx, `SELECT COUNT(*), COUNT(claimed_at), MIN(created_at) FROM work_items WHERE environment_id = $1 AND state = $2`,
		environmentID, store.WorkQueued).Scan(&st.Depth, &st.Pending, &oldest)
	st.OldestQueuedAt = timePtr(oldest)
	return st, err
}
