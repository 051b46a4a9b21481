package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// CreateAPIKey implements store.Keys: a key without a role is an admin,
// one without a status active. ctx's audit entry is recorded with it.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if k.Role == "" {
		k.Role = store.RoleAdmin
	}
	if k.Status == "" {
		k.Status = store.KeyActive
	}
	return s.withAudit(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (id, name, hash, hint, created_at, revoked_at, role, workspace_id, status, created_by_key_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Name, k.Hash, k.Hint, k.CreatedAt.UnixNano(), nsPtr(k.RevokedAt), k.Role, k.WorkspaceID, k.Status, k.CreatedByKeyID)
		return s.conflict(err, "api key")
	})
}

const keyCols = `id, name, hash, hint, created_at, revoked_at, role, workspace_id, status, created_by_key_id`

func scanKey(row Row) (store.APIKey, error) {
	var k store.APIKey
	var created int64
	var revoked *int64
	if err := row.Scan(&k.ID, &k.Name, &k.Hash, &k.Hint, &created, &revoked, &k.Role, &k.WorkspaceID, &k.Status, &k.CreatedByKeyID); err != nil {
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

// RevokeAPIKey implements store.Keys: the key's status becomes archived.
// ctx's audit entry is recorded with it.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	return s.withAudit(ctx, func(tx Querier) error {
		n, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?), status = ? WHERE id = ?`, at.UnixNano(), store.KeyArchived, id)
		if err == nil && n == 0 {
			return fmt.Errorf("api key %s: %w", id, store.ErrNotFound)
		}
		return err
	})
}

func getAPIKey(ctx context.Context, db Querier, id, lock string) (store.APIKey, error) {
	k, err := scanKey(db.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = ?`+lock, id))
	return k, notFound(err, "api key", id)
}

// GetAPIKey implements store.KeyAdmin.
func (s *Store) GetAPIKey(ctx context.Context, id string) (store.APIKey, error) {
	return getAPIKey(ctx, s.r, id, "")
}

// UpdateAPIKey implements store.KeyAdmin. The id, hash, hint, creation
// time and creator stay. Archiving sets RevokedAt (now, unless fn set
// it), and a RevokedAt archives; an archived key stays archived
// (ErrConflict).
func (s *Store) UpdateAPIKey(ctx context.Context, id string, fn func(*store.APIKey) error) (store.APIKey, error) {
	var out store.APIKey
	err := s.withAudit(ctx, func(tx Querier) error {
		cur, err := getAPIKey(ctx, tx, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		k := cur
		if err := fn(&k); err != nil {
			return err
		}
		k.ID, k.Hash, k.Hint, k.CreatedAt, k.CreatedByKeyID = cur.ID, cur.Hash, cur.Hint, cur.CreatedAt, cur.CreatedByKeyID
		if err := archiveRule(cur, &k); err != nil {
			return err
		}
		out = k
		_, err = tx.Exec(ctx, `UPDATE api_keys SET name = ?, role = ?, workspace_id = ?, status = ?, revoked_at = ? WHERE id = ?`,
			k.Name, k.Role, k.WorkspaceID, k.Status, nsPtr(k.RevokedAt), id)
		return err
	})
	return out, err
}

// archiveRule keeps a key's status and RevokedAt together: archived if
// and only if revoked, and for good.
func archiveRule(cur store.APIKey, k *store.APIKey) error {
	if cur.Status == store.KeyArchived || cur.RevokedAt != nil {
		if k.Status != store.KeyArchived || k.RevokedAt == nil {
			return fmt.Errorf("api key %s is archived: %w", cur.ID, store.ErrConflict)
		}
		k.RevokedAt = cur.RevokedAt
		return nil
	}
	if k.RevokedAt != nil {
		k.Status = store.KeyArchived
	}
	if k.Status == store.KeyArchived && k.RevokedAt == nil {
		now := time.Now().UTC()
		k.RevokedAt = &now
	}
	return nil
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

// EnvironmentKeyByHash implements store.EnvironmentKeys. The key is read
// whatever ctx's workspace: it says which workspace it works in.
func (s *Store) EnvironmentKeyByHash(ctx context.Context, hash string) (store.EnvironmentKey, error) {
	var k store.EnvironmentKey
	var created int64
	var revoked *int64
	err := s.r.QueryRow(ctx, `SELECT k.id, k.environment_id, k.hash, k.hint, k.created_at, k.revoked_at, COALESCE(e.workspace_id, '')
		FROM environment_keys k LEFT JOIN environments e ON e.id = k.environment_id WHERE k.hash = ?`, hash).
		Scan(&k.ID, &k.EnvironmentID, &k.Hash, &k.Hint, &created, &revoked, &k.WorkspaceID)
	if err != nil {
		return k, notFound(err, "environment key", "(by hash)")
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	k.RevokedAt = timePtr(revoked)
	return k, nil
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
