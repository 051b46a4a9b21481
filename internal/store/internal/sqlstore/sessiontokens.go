package sqlstore

import (
	"context"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// CreateSessionToken implements store.SessionTokens.
func (s *Store) CreateSessionToken(ctx context.Context, t store.SessionToken) error {
	_, err := s.exec(ctx, `INSERT INTO session_tokens (hash, session_id, work_id, environment_id, created_at) VALUES (?, ?, ?, ?, ?)`,
		t.Hash, t.SessionID, t.WorkID, t.EnvironmentID, t.CreatedAt.UnixNano())
	return s.conflict(err, "sessions token (hash taken)")
}

// SessionTokenByHash implements store.SessionTokens: the join with the
// sessions finds no token of a deleted session.
func (s *Store) SessionTokenByHash(ctx context.Context, hash string) (store.SessionToken, error) {
	var t store.SessionToken
	var created int64
	err := s.r.QueryRow(ctx, `SELECT t.hash, t.session_id, t.work_id, t.environment_id, t.created_at, s.workspace_id, s.archived
		FROM session_tokens t JOIN sessions s ON s.id = t.session_id WHERE t.hash = ?`, hash).
		Scan(&t.Hash, &t.SessionID, &t.WorkID, &t.EnvironmentID, &created, &t.WorkspaceID, &t.SessionArchived)
	if err != nil {
		return t, notFound(err, "sessions token", "(by hash)")
	}
	t.CreatedAt = time.Unix(0, created).UTC()
	return t, nil
}
