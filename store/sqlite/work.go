package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reinsdev/reins/store"
)

func nsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func writeWork(ctx context.Context, tx *sql.Tx, w store.WorkItem, insert bool) error {
	body, err := json.Marshal(w)
	if err != nil {
		return err
	}
	acked := 0
	if w.AcknowledgedAt != nil {
		acked = 1
	}
	if insert {
		_, err = tx.ExecContext(ctx, `INSERT INTO work_items (id, environment_id, session_id, state, created_at, claimed_at, acknowledged, lease_expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.EnvironmentID, w.SessionID, w.State, w.CreatedAt.UnixNano(), nsPtr(w.ClaimedAt), acked, nsPtr(w.LeaseExpiresAt), body)
		if isUnique(err) {
			return fmt.Errorf("work %s: %w", w.ID, store.ErrConflict)
		}
		return err
	}
	// Once acknowledged, always recorded as such (SessionWorkAcked).
	_, err = tx.ExecContext(ctx, `UPDATE work_items SET state = ?, claimed_at = ?, acknowledged = MAX(acknowledged, ?), lease_expires_at = ?, body = ? WHERE id = ?`,
		w.State, nsPtr(w.ClaimedAt), acked, nsPtr(w.LeaseExpiresAt), body, w.ID)
	return err
}

// CreateWork implements store.Work.
func (s *Store) CreateWork(ctx context.Context, w store.WorkItem) error {
	return s.withTx(ctx, func(tx *sql.Tx) error { return writeWork(ctx, tx, w, true) })
}

func scanWork(row interface{ Scan(...any) error }) (store.WorkItem, error) {
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
	w, err := scanWork(s.r.QueryRowContext(ctx, `SELECT body FROM work_items WHERE id = ? AND environment_id = ?`, id, environmentID))
	return w, notFound(err, "work", id)
}

// ListWork implements store.Work.
func (s *Store) ListWork(ctx context.Context, environmentID string, q store.ListQuery) ([]store.Item[store.WorkItem], error) {
	where, args, tail := page([]string{"environment_id = ?"}, []any{environmentID}, "pos", q)
	return listItems[store.WorkItem](ctx, s.r, `SELECT pos, body FROM work_items`+whereClause(where)+tail, args, q)
}

// UpdateWork implements store.Work.
func (s *Store) UpdateWork(ctx context.Context, environmentID, id string, fn func(*store.WorkItem) error) (store.WorkItem, error) {
	var out store.WorkItem
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		w, err := scanWork(tx.QueryRowContext(ctx, `SELECT body FROM work_items WHERE id = ? AND environment_id = ?`, id, environmentID))
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

// ClaimWork implements store.Work.
func (s *Store) ClaimWork(ctx context.Context, environmentID, worker string, now, reclaimBefore time.Time) (store.WorkItem, error) {
	var out store.WorkItem
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		w, err := scanWork(tx.QueryRowContext(ctx, `SELECT body FROM work_items WHERE environment_id = ? AND state = ? AND (claimed_at IS NULL OR claimed_at < ?) ORDER BY pos LIMIT 1`,
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
	w, err := scanWork(s.r.QueryRowContext(ctx, `SELECT body FROM work_items WHERE session_id = ? AND state != ? ORDER BY pos DESC LIMIT 1`, sessionID, store.WorkStopped))
	return w, notFound(err, "open work of session", sessionID)
}

// SessionWorkAcked implements store.Work.
func (s *Store) SessionWorkAcked(ctx context.Context, sessionID string) (bool, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM work_items WHERE session_id = ? AND acknowledged = 1`, sessionID).Scan(&n)
	return n > 0, err
}

// ExpiredWork implements store.Work.
func (s *Store) ExpiredWork(ctx context.Context, now time.Time) ([]store.WorkItem, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT body FROM work_items WHERE state IN (?, ?, ?) AND lease_expires_at IS NOT NULL AND lease_expires_at < ? ORDER BY pos`,
		store.WorkStarting, store.WorkActive, store.WorkStopping, now.UnixNano())
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
	var oldest sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(claimed_at), MIN(created_at) FROM work_items WHERE environment_id = ? AND state = ?`,
		environmentID, store.WorkQueued).Scan(&st.Depth, &st.Pending, &oldest)
	if oldest.Valid {
		t := time.Unix(0, oldest.Int64).UTC()
		st.OldestQueuedAt = &t
	}
	return st, err
}
