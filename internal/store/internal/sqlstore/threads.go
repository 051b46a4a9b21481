package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Threads implements store.Tx.
func (t *sessionTx) Threads() ([]ma.SessionThread, error) {
	return collect(t.ctx, t.tx, scanJSON[ma.SessionThread], `SELECT body FROM session_threads WHERE session_id = ? ORDER BY pos`, t.sess.ID)
}

// Thread implements store.Tx.
func (t *sessionTx) Thread(id string) (ma.SessionThread, error) {
	th, err := scanJSON[ma.SessionThread](t.tx.QueryRow(t.ctx, `SELECT body FROM session_threads WHERE session_id = ? AND id = ?`, t.sess.ID, id))
	return th, notFound(err, "thread", id)
}

// PutThread implements store.Tx.
func (t *sessionTx) PutThread(th *ma.SessionThread) error {
	th.SessionID, th.Type = t.sess.ID, ma.ThreadType
	now := ma.Time(time.Now())
	if th.CreatedAt == "" {
		th.CreatedAt = now
	}
	if th.UpdatedAt == "" {
		th.UpdatedAt = now
	}
	body, err := json.Marshal(th)
	if err != nil {
		return fmt.Errorf("thread %s: %w", th.ID, err)
	}
	n, err := t.tx.Exec(t.ctx, `UPDATE session_threads SET status = ?, archived = ?, body = ? WHERE session_id = ? AND id = ?`,
		th.Status, th.ArchivedAt != nil, body, t.sess.ID, th.ID)
	if err != nil || n > 0 {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `INSERT INTO session_threads (id, session_id, status, archived, body) VALUES (?, ?, ?, ?, ?)`,
		th.ID, t.sess.ID, th.Status, th.ArchivedAt != nil, body)
	return t.s.conflict(err, "thread "+th.ID)
}

// ListThreads implements store.Sessions.
func (s *Store) ListThreads(ctx context.Context, sessionID string, tq store.ThreadQuery) ([]store.Item[ma.SessionThread], error) {
	if _, _, err := getSession(ctx, s.r, sessionID, ""); err != nil {
		return nil, err
	}
	var q query
	q.and("session_id = ?", sessionID)
	if len(tq.Statuses) > 0 {
		q.in("status", tq.Statuses)
	}
	l := store.ListQuery{After: tq.After, Limit: tq.Limit}
	return list(ctx, s.r, scanItem[ma.SessionThread], `SELECT pos, body FROM session_threads`, "pos", &q, l)
}

// GetThread implements store.Sessions.
func (s *Store) GetThread(ctx context.Context, sessionID, threadID string) (ma.SessionThread, error) {
	cond, args := inParentWorkspace(ctx, "session_id", "sessions")
	th, err := scanJSON[ma.SessionThread](s.r.QueryRow(ctx, `SELECT body FROM session_threads WHERE session_id = ? AND id = ?`+cond,
		append([]any{sessionID, threadID}, args...)...))
	return th, notFound(err, "thread", threadID)
}
