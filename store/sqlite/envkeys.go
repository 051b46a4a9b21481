package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/reinsdev/reins/store"
)

// CreateEnvironmentKey implements store.EnvironmentKeys.
func (s *Store) CreateEnvironmentKey(ctx context.Context, k store.EnvironmentKey) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO environment_keys (id, environment_id, hash, hint, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.EnvironmentID, k.Hash, k.Hint, k.CreatedAt.UnixNano())
	if isUnique(err) {
		return fmt.Errorf("environment key: %w", store.ErrConflict)
	}
	return err
}

const envKeyCols = `id, environment_id, hash, hint, created_at, revoked_at`

func scanEnvKey(row interface{ Scan(...any) error }) (store.EnvironmentKey, error) {
	var k store.EnvironmentKey
	var created int64
	var revoked sql.NullInt64
	if err := row.Scan(&k.ID, &k.EnvironmentID, &k.Hash, &k.Hint, &created, &revoked); err != nil {
		return k, err
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	if revoked.Valid {
		t := time.Unix(0, revoked.Int64).UTC()
		k.RevokedAt = &t
	}
	return k, nil
}

// EnvironmentKeyByHash implements store.EnvironmentKeys.
func (s *Store) EnvironmentKeyByHash(ctx context.Context, hash string) (store.EnvironmentKey, error) {
	k, err := scanEnvKey(s.r.QueryRowContext(ctx, `SELECT `+envKeyCols+` FROM environment_keys WHERE hash = ?`, hash))
	return k, notFound(err, "environment key", "(by hash)")
}

// ListEnvironmentKeys implements store.EnvironmentKeys.
func (s *Store) ListEnvironmentKeys(ctx context.Context, environmentID string) ([]store.EnvironmentKey, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+envKeyCols+` FROM environment_keys WHERE environment_id = ? ORDER BY created_at, id`, environmentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.EnvironmentKey
	for rows.Next() {
		k, err := scanEnvKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeEnvironmentKey implements store.EnvironmentKeys.
func (s *Store) RevokeEnvironmentKey(ctx context.Context, environmentID, id string, at time.Time) (store.EnvironmentKey, error) {
	var k store.EnvironmentKey
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE environment_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND environment_id = ?`, at.UnixNano(), id, environmentID); err != nil {
			return err
		}
		var err error
		k, err = scanEnvKey(tx.QueryRowContext(ctx, `SELECT `+envKeyCols+` FROM environment_keys WHERE id = ? AND environment_id = ?`, id, environmentID))
		return notFound(err, "environment key", id)
	})
	return k, err
}
