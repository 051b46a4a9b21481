package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/reinsdev/reins/store"
)

// CreateAPIKey implements store.Keys.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO api_keys (id, name, hash, hint, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.Hash, k.Hint, k.CreatedAt.UnixNano())
	if isUnique(err) {
		return fmt.Errorf("api key: %w", store.ErrConflict)
	}
	return err
}

func scanKey(row interface{ Scan(...any) error }) (store.APIKey, error) {
	var k store.APIKey
	var created int64
	var revoked sql.NullInt64
	if err := row.Scan(&k.ID, &k.Name, &k.Hash, &k.Hint, &created, &revoked); err != nil {
		return k, err
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	if revoked.Valid {
		t := time.Unix(0, revoked.Int64).UTC()
		k.RevokedAt = &t
	}
	return k, nil
}

// APIKeyByHash implements store.Keys.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	k, err := scanKey(s.r.QueryRowContext(ctx, `SELECT id, name, hash, hint, created_at, revoked_at FROM api_keys WHERE hash = ?`, hash))
	return k, notFound(err, "api key", "(by hash)")
}

// ListAPIKeys implements store.Keys.
func (s *Store) ListAPIKeys(ctx context.Context) ([]store.APIKey, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, name, hash, hint, created_at, revoked_at FROM api_keys ORDER BY created_at, id`)
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
	res, err := s.w.ExecContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, at.UnixNano(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("api key %s: %w", id, store.ErrNotFound)
	}
	return nil
}
