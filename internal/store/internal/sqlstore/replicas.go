package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// AnnounceHands implements store.Replicas: the replica's rows are
// replaced, in one transaction, by one row per environment.
func (s *Store) AnnounceHands(ctx context.Context, replica string, envIDs []string, ttl time.Duration) error {
	return s.d.WithTx(ctx, func(tx Querier) error {
		if _, err := tx.Exec(ctx, `DELETE FROM replica_hands WHERE replica = ?`, replica); err != nil {
			return err
		}
		for _, id := range envIDs {
			if _, err := tx.Exec(ctx, `INSERT INTO replica_hands (environment_id, replica, expires_at) VALUES (?, ?, `+s.d.Now()+` + ?)`,
				id, replica, ttl.Nanoseconds()); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReplicasWithHands implements store.Replicas.
func (s *Store) ReplicasWithHands(ctx context.Context, envID string) ([]string, error) {
	return collect(ctx, s.r, scanString,
		`SELECT replica FROM replica_hands WHERE environment_id = ? AND expires_at > `+s.d.Now()+` ORDER BY replica`, envID)
}

// Announced implements store.Replicas.
func (s *Store) Announced(ctx context.Context, replica string) ([]string, error) {
	return collect(ctx, s.r, scanString,
		`SELECT environment_id FROM replica_hands WHERE replica = ? AND expires_at > `+s.d.Now()+` ORDER BY environment_id`, replica)
}

// WorkspaceMarker implements store.Replicas.
func (s *Store) WorkspaceMarker(ctx context.Context, sessionID string) (string, error) {
	var m string
	err := s.r.QueryRow(ctx, `SELECT marker FROM session_workspaces WHERE session_id = ?`, sessionID).Scan(&m)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return m, err
}

// SetWorkspaceMarker implements store.Replicas.
func (s *Store) SetWorkspaceMarker(ctx context.Context, sessionID, marker string) error {
	_, err := s.exec(ctx, `INSERT INTO session_workspaces (session_id, marker) VALUES (?, ?) ON CONFLICT (session_id) DO UPDATE SET marker = excluded.marker`,
		sessionID, marker)
	return err
}

// ClaimSetting implements store.Replicas.
func (s *Store) ClaimSetting(ctx context.Context, name, value string) (string, error) {
	if _, err := s.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
		return "", err
	}
	var v string
	err := s.r.QueryRow(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	return v, err
}
