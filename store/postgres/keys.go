package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reinsdev/reins/store"
)

const keyCols = `id, name, hash, hint, created_at, revoked_at`

// CreateAPIKey implements store.Keys.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO api_keys (id, name, hash, hint, created_at) VALUES ($1, $2, $3, $4, $5)`,
		k.ID, k.Name, k.Hash, k.Hint, k.CreatedAt.UnixNano())
	if isUnique(err) {
		return fmt.Errorf("api key: %w", store.ErrConflict)
	}
	return err
}

func scanKey(row pgx.Row) (store.APIKey, error) {
	var k store.APIKey
	var created int64
	var revoked *int64
	if err := row.Scan(&k.ID, &k.Name, &k.Hash, &k.Hint, &created, &revoked); err != nil {
		return k, err
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	k.RevokedAt = timePtr(revoked)
	return k, nil
}

// APIKeyByHash implements store.Keys.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE hash = $1`, hash))
	return k, notFound(err, "api key", "(by hash)")
}

// ListAPIKeys implements store.Keys.
func (s *Store) ListAPIKeys(ctx context.Context) ([]store.APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyCols+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeAPIKey implements store.Keys.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, at.UnixNano(), id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("api key %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// CreateEnvironmentKey implements store.EnvironmentKeys.
func (s *Store) CreateEnvironmentKey(ctx context.Context, k store.EnvironmentKey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO environment_keys (id, environment_id, hash, hint, created_at) VALUES ($1, $2, $3, $4, $5)`,
		k.ID, k.EnvironmentID, k.Hash, k.Hint, k.CreatedAt.UnixNano())
	if isUnique(err) {
		return fmt.Errorf("environment key: %w", store.ErrConflict)
	}
	return err
}

const envKeyCols = `id, environment_id, hash, hint, created_at, revoked_at`

func scanEnvKey(row pgx.Row) (store.EnvironmentKey, error) {
	var k store.EnvironmentKey
	var created int64
	var revoked *int64
	if err := row.Scan(&k.ID, &k.EnvironmentID, &k.Hash, &k.Hint, &created, &revoked); err != nil {
		return k, err
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	k.RevokedAt = timePtr(revoked)
	return k, nil
}

// EnvironmentKeyByHash implements store.EnvironmentKeys.
func (s *Store) EnvironmentKeyByHash(ctx context.Context, hash string) (store.EnvironmentKey, error) {
	k, err := scanEnvKey(s.pool.QueryRow(ctx, `SELECT `+envKeyCols+` FROM environment_keys WHERE hash = $1`, hash))
	return k, notFound(err, "environment key", "(by hash)")
}

// ListEnvironmentKeys implements store.EnvironmentKeys.
func (s *Store) ListEnvironmentKeys(ctx context.Context, environmentID string) ([]store.EnvironmentKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+envKeyCols+` FROM environment_keys WHERE environment_id = $1 ORDER BY created_at, id`, environmentID)
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
	k, err := scanEnvKey(s.pool.QueryRow(ctx, `UPDATE environment_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND environment_id = $3 RETURNING `+envKeyCols,
		at.UnixNano(), id, environmentID))
	return k, notFound(err, "environment key", id)
}
