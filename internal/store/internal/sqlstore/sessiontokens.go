package sqlstore

import (
	"context"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// CreateSessionToken implements store.SessionTokens.
func (s *Store) CreateSessionToken(ctx context.Context, t store.SessionToken) error {
	_, err := s.exec(ctx, `INSERT INTO session_tokens (hash, session_id, work_id, environment_id, environment_key_id, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		t.Hash, t.SessionID, t.WorkID, t.EnvironmentID, t.EnvironmentKeyID, t.CreatedAt.UnixNano())
	return s.conflict(err, "sessions token (hash taken)")
}

// SessionTokenByHash implements store.SessionTokens: the join with the
// sessions finds no token of a deleted session.
func (s *Store) SessionTokenByHash(ctx context.Context, hash string) (store.SessionToken, error) {
	var t store.SessionToken
	var created int64
	err := s.r.QueryRow(ctx, `SELECT t.hash, t.session_id, t.work_id, t.environment_id, t.environment_key_id, t.created_at,
			s.workspace_id, s.archived, (t.environment_key_id <> '' AND (k.id IS NULL OR k.revoked_at IS NOT NULL)), (e.id IS NULL OR e.archived)
		FROM session_tokens t JOIN sessions s ON s.id = t.session_id
		LEFT JOIN environment_keys k ON k.id = t.environment_key_id
		LEFT JOIN environments e ON e.id = t.environment_id
		WHERE t.hash = ?`, hash).
		Scan(&t.Hash, &t.SessionID, &t.WorkID, &t.EnvironmentID, &t.EnvironmentKeyID, &created,
			&t.WorkspaceID, &t.SessionArchived, &t.KeyRevoked, &t.EnvironmentArchived)
	if err != nil {
		return t, notFound(err, "sessions token", "(by hash)")
	}
	t.CreatedAt = time.Unix(0, created).UTC()
	return t, nil
}
