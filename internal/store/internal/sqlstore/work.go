package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// CreateWork implements store.Work. A unique index allows one open item a
// session: a second is ErrConflict, like a taken id.
func (s *Store) CreateWork(ctx context.Context, w store.WorkItem) error {
	return s.d.WithTx(ctx, func(tx Querier) error { return s.writeWork(ctx, tx, w, true) })
}

func (s *Store) writeWork(ctx context.Context, tx Querier, w store.WorkItem, insert bool) error {
	body, err := json.Marshal(w)
	if err != nil {
		return err
	}
	acked := w.AcknowledgedAt != nil
	if insert {
		_, err = tx.Exec(ctx, `INSERT INTO work_items (id, environment_id, session_id, state, created_at, claimed_at, acknowledged, lease_expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.EnvironmentID, w.SessionID, w.State, w.CreatedAt.UnixNano(), nsPtr(w.ClaimedAt), acked, nsPtr(w.LeaseExpiresAt), body)
	} else {
		// Once acknowledged, always recorded as such (SessionWorkAcked).
		_, err = tx.Exec(ctx, `UPDATE work_items SET state = ?, claimed_at = ?, acknowledged = (acknowledged OR ?), lease_expires_at = ?, body = ? WHERE id = ?`,
			w.State, nsPtr(w.ClaimedAt), acked, nsPtr(w.LeaseExpiresAt), body, w.ID)
	}
	return s.conflict(err, fmt.Sprintf("work %s (id taken, or session %s has open work)", w.ID, w.SessionID))
}

// GetWork implements store.Work.
func (s *Store) GetWork(ctx context.Context, environmentID, id string) (store.WorkItem, error) {
	w, err := scanJSON[store.WorkItem](s.r.QueryRow(ctx, `SELECT body FROM work_items WHERE id = ? AND environment_id = ?`, id, environmentID))
	return w, notFound(err, "work", id)
}

// ListWork implements store.Work.
func (s *Store) ListWork(ctx context.Context, environmentID string, l store.ListQuery) ([]store.Item[store.WorkItem], error) {
	var q query
	q.and("environment_id = ?", environmentID)
	return list(ctx, s.r, scanItem[store.WorkItem], `SELECT pos, body FROM work_items`, "pos", &q, l)
}

// UpdateWork implements store.Work.
func (s *Store) UpdateWork(ctx context.Context, environmentID, id string, fn func(*store.WorkItem) error) (store.WorkItem, error) {
	var out store.WorkItem
	err := s.d.WithTx(ctx, func(tx Querier) error {
		w, err := scanJSON[store.WorkItem](tx.QueryRow(ctx, `SELECT body FROM work_items WHERE id = ? AND environment_id = ?`+s.lock(LockUpdate), id, environmentID))
		if err != nil {
			return notFound(err, "work", id)
		}
		if err := fn(&w); err != nil {
			return err
		}
		out = w
		return s.writeWork(ctx, tx, w, false)
	})
	return out, err
}

// ClaimWork implements store.Work. Where the driver locks rows, items
// another transaction is claiming at the same moment are skipped, so each
// poll gets a different item.
func (s *Store) ClaimWork(ctx context.Context, environmentID, worker string, now, reclaimBefore time.Time) (store.WorkItem, error) {
	var out store.WorkItem
	err := s.d.WithTx(ctx, func(tx Querier) error {
		w, err := scanJSON[store.WorkItem](tx.QueryRow(ctx, `SELECT body FROM work_items WHERE environment_id = ? AND state = ? AND (claimed_at IS NULL OR claimed_at < ?) ORDER BY pos LIMIT 1`+s.lock(LockClaim),
			environmentID, store.WorkQueued, reclaimBefore.UnixNano()))
		if err != nil {
			return notFound(err, "queued work of environment", environmentID)
		}
		w.ClaimedAt, w.ClaimedBy = &now, worker
		out = w
		return s.writeWork(ctx, tx, w, false)
	})
	return out, err
}

// OpenWorkForSession implements store.Work.
func (s *Store) OpenWorkForSession(ctx context.Context, sessionID string) (store.WorkItem, error) {
	w, err := scanJSON[store.WorkItem](s.r.QueryRow(ctx, `SELECT body FROM work_items WHERE session_id = ? AND state <> ? ORDER BY pos DESC LIMIT 1`, sessionID, store.WorkStopped))
	return w, notFound(err, "open work of session", sessionID)
}

// SessionWorkAcked implements store.Work.
func (s *Store) SessionWorkAcked(ctx context.Context, sessionID string) (bool, error) {
	var acked bool
	err := s.r.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM work_items WHERE session_id = ? AND acknowledged)`, sessionID).Scan(&acked)
	return acked, err
}

// ExpiredWork implements store.Work.
func (s *Store) ExpiredWork(ctx context.Context, now time.Time) ([]store.WorkItem, error) {
	var q query
	q.in("state", []string{store.WorkStarting, store.WorkActive, store.WorkStopping})
	q.and("lease_expires_at IS NOT NULL AND lease_expires_at < ?", now.UnixNano())
	return collect(ctx, s.r, scanJSON[store.WorkItem], `SELECT body FROM work_items`+q.clause()+` ORDER BY pos`, q.args...)
}

// WorkStats implements store.Work.
func (s *Store) WorkStats(ctx context.Context, environmentID string) (store.WorkStats, error) {
	var st store.WorkStats
	var oldest *int64
	err := s.r.QueryRow(ctx, `SELECT COUNT(*), COUNT(claimed_at), MIN(created_at) FROM work_items WHERE environment_id = ? AND state = ?`,
		environmentID, store.WorkQueued).Scan(&st.Depth, &st.Pending, &oldest)
	st.OldestQueuedAt = timePtr(oldest)
	return st, err
}

// AllWorkStats implements store.Work.
func (s *Store) AllWorkStats(ctx context.Context) (store.WorkStats, error) {
	var st store.WorkStats
	var oldest *int64
	err := s.r.QueryRow(ctx, `SELECT COUNT(*), COUNT(claimed_at), MIN(created_at) FROM work_items WHERE state = ?`,
		store.WorkQueued).Scan(&st.Depth, &st.Pending, &oldest)
	st.OldestQueuedAt = timePtr(oldest)
	return st, err
}
