package sqlstore

import (
	"context"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// CreateAPIKey implements store.Keys.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	_, err := s.exec(ctx, `INSERT INTO api_keys (id, name, hash, hint, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.Hash, k.Hint, k.CreatedAt.UnixNano())
	return s.conflict(err, "api key")
}

const keyCols = `id, name, hash, hint, created_at, revoked_at`

func scanKey(row Row) (store.APIKey, error) {
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
	k, err := scanKey(s.r.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE hash = ?`, hash))
	return k, notFound(err, "api key", "(by hash)")
}

// ListAPIKeys implements store.Keys.
func (s *Store) ListAPIKeys(ctx context.Context) ([]store.APIKey, error) {
	return collect(ctx, s.r, scanKey, `SELECT `+keyCols+` FROM api_keys ORDER BY created_at, id`)
}

// RevokeAPIKey implements store.Keys.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	return s.mustChange(ctx, "api key "+id, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, at.UnixNano(), id)
}

// CreateEnvironmentKey implements store.EnvironmentKeys.
func (s *Store) CreateEnvironmentKey(ctx context.Context, k store.EnvironmentKey) error {
	_, err := s.exec(ctx, `INSERT INTO environment_keys (id, environment_id, hash, hint, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.EnvironmentID, k.Hash, k.Hint, k.CreatedAt.UnixNano())
	return s.conflict(err, "environment key")
}

const envKeyCols = `id, environment_id, hash, hint, created_at, revoked_at`

func scanEnvKey(row Row) (store.EnvironmentKey, error) {
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
	k, err := scanEnvKey(s.r.QueryRow(ctx, `SELECT `+envKeyCols+` FROM environment_keys WHERE hash = ?`, hash))
	return k, notFound(err, "environment key", "(by hash)")
}

// ListEnvironmentKeys implements store.EnvironmentKeys.
func (s *Store) ListEnvironmentKeys(ctx context.Context, environmentID string) ([]store.EnvironmentKey, error) {
	return collect(ctx, s.r, scanEnvKey, `SELECT `+envKeyCols+` FROM environment_keys WHERE environment_id = ? ORDER BY created_at, id`, environmentID)
}

// RevokeEnvironmentKey implements store.EnvironmentKeys.
func (s *Store) RevokeEnvironmentKey(ctx context.Context, environmentID, id string, at time.Time) (store.EnvironmentKey, error) {
	var k store.EnvironmentKey
	err := s.d.WithTx(ctx, func(tx Querier) error {
		var err error
		k, err = scanEnvKey(tx.QueryRow(ctx, `UPDATE environment_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND environment_id = ? RETURNING `+envKeyCols,
			at.UnixNano(), id, environmentID))
		return notFound(err, "environment key", id)
	})
	return k, err
}
