package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// CreateVault implements store.Vaults.
func (s *Store) CreateVault(ctx context.Context, v ma.Vault) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO vaults (id, created_at, archived, body) VALUES ($1, $2, $3, $4)`, v.ID, unixOf(v.CreatedAt), v.ArchivedAt != nil, body)
	if isUnique(err) {
		return fmt.Errorf("vault %s: %w", v.ID, store.ErrConflict)
	}
	return err
}

func getVault(ctx context.Context, db querier, id, suffix string) (ma.Vault, error) {
	var v ma.Vault
	if err := getJSON(ctx, db, &v, `SELECT body FROM vaults WHERE id = $1`+suffix, id); err != nil {
		return ma.Vault{}, notFound(err, "vault", id)
	}
	return v, nil
}

// GetVault implements store.Vaults.
func (s *Store) GetVault(ctx context.Context, id string) (ma.Vault, error) {
	return getVault(ctx, s.pool, id, "")
}

func putVault(ctx context.Context, tx pgx.Tx, v ma.Vault) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE vaults SET archived = $1, body = $2 WHERE id = $3`, v.ArchivedAt != nil, body, v.ID)
	return err
}

// UpdateVault implements store.Vaults.
func (s *Store) UpdateVault(ctx context.Context, id string, fn func(*ma.Vault) error) (ma.Vault, error) {
	var out ma.Vault
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		v, err := getVault(ctx, tx, id, " FOR UPDATE")
		if err != nil {
			return err
		}
		if err := fn(&v); err != nil {
			return err
		}
		v.ID = id
		out = v
		return putVault(ctx, tx, v)
	})
	return out, err
}

// ArchiveVault implements store.Vaults.
func (s *Store) ArchiveVault(ctx context.Context, id string, at string) (ma.Vault, error) {
	var out ma.Vault
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		v, err := getVault(ctx, tx, id, " FOR UPDATE")
		if err != nil {
			return err
		}
		out = v
		if v.ArchivedAt != nil {
			return nil
		}
		v.ArchivedAt, v.UpdatedAt = &at, at
		out = v
		if err := putVault(ctx, tx, v); err != nil {
			return err
		}
		creds, err := queryCredentials(ctx, tx, `SELECT pos, body, sealed FROM vault_credentials WHERE vault_id = $1 AND NOT archived FOR UPDATE`, id)
		if err != nil {
			return err
		}
		for _, it := range creds {
			c := it.Value
			c.ArchivedAt, c.UpdatedAt = &at, at
			if err := putCredential(ctx, tx, c); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// ListVaults implements store.Vaults.
func (s *Store) ListVaults(ctx context.Context, l store.ListQuery) ([]store.Item[ma.Vault], error) {
	var q query
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	tail := q.page("pos", l)
	return listItems[ma.Vault](ctx, s.pool, `SELECT pos, body FROM vaults`+tail, q.args, l)
}

// DeleteVault implements store.Vaults. Its credentials go with it (ON
// DELETE CASCADE).
func (s *Store) DeleteVault(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM vaults WHERE id = $1`, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("vault %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// matchKey is what must be unique among a vault's live credentials.
func matchKey(c ma.Credential) string {
	if c.Auth.Type == ma.AuthEnvVar {
		return c.Auth.SecretName
	}
	return c.Auth.MCPServerURL
}

func credentialConflict(c ma.Credential) error {
	if c.Auth.Type == ma.AuthEnvVar {
		return fmt.Errorf("credential with secret_name %q in vault %s: %w", c.Auth.SecretName, c.VaultID, store.ErrConflict)
	}
	return fmt.Errorf("credential for mcp_server_url %q in vault %s: %w", c.Auth.MCPServerURL, c.VaultID, store.ErrConflict)
}

// kindClass groups the MCP kinds: one live credential per server URL,
// whatever its kind.
func kindClass(c ma.Credential) string {
	if c.Auth.Type == ma.AuthEnvVar {
		return "env"
	}
	return "mcp"
}

// CreateCredential implements store.Vaults.
func (s *Store) CreateCredential(ctx context.Context, c store.Credential) error {
	body, err := json.Marshal(c.Credential)
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(tx pgx.Tx) error {
		// FOR SHARE keeps the vault from being deleted meanwhile.
		if _, err := getVault(ctx, tx, c.VaultID, " FOR SHARE"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO vault_credentials (id, vault_id, kind, match_key, archived, body, sealed) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			c.ID, c.VaultID, kindClass(c.Credential), matchKey(c.Credential), c.ArchivedAt != nil, body, sealedBytes(c.Sealed))
		if isUnique(err) {
			return credentialConflict(c.Credential)
		}
		return err
	})
}

// sealedBytes keeps a nil blob from becoming NULL in the NOT NULL column.
func sealedBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func getCredential(ctx context.Context, db querier, vaultID, id, suffix string) (store.Credential, error) {
	var body, sealed []byte
	if err := db.QueryRow(ctx, `SELECT body, sealed FROM vault_credentials WHERE id = $1 AND vault_id = $2`+suffix, id, vaultID).Scan(&body, &sealed); err != nil {
		return store.Credential{}, notFound(err, "credential "+id+" in vault", vaultID)
	}
	c := store.Credential{Sealed: sealed}
	err := json.Unmarshal(body, &c.Credential)
	return c, err
}

func putCredential(ctx context.Context, tx pgx.Tx, c store.Credential) error {
	body, err := json.Marshal(c.Credential)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE vault_credentials SET kind = $1, match_key = $2, archived = $3, body = $4, sealed = $5 WHERE id = $6`,
		kindClass(c.Credential), matchKey(c.Credential), c.ArchivedAt != nil, body, sealedBytes(c.Sealed), c.ID)
	if isUnique(err) {
		return credentialConflict(c.Credential)
	}
	return err
}

// GetCredential implements store.Vaults.
func (s *Store) GetCredential(ctx context.Context, vaultID, id string) (store.Credential, error) {
	return getCredential(ctx, s.pool, vaultID, id, "")
}

// UpdateCredential implements store.Vaults.
func (s *Store) UpdateCredential(ctx context.Context, vaultID, id string, fn func(*store.Credential) error) (store.Credential, error) {
	var out store.Credential
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		c, err := getCredential(ctx, tx, vaultID, id, " FOR UPDATE")
		if err != nil {
			return err
		}
		if err := fn(&c); err != nil {
			return err
		}
		c.ID, c.VaultID = id, vaultID
		out = c
		return putCredential(ctx, tx, c)
	})
	return out, err
}

func queryCredentials(ctx context.Context, db querier, sql string, args ...any) ([]store.Item[store.Credential], error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Item[store.Credential]
	for rows.Next() {
		var it store.Item[store.Credential]
		var body []byte
		if err := rows.Scan(&it.Pos, &body, &it.Value.Sealed); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(body, &it.Value.Credential); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// ListCredentials implements store.Vaults.
func (s *Store) ListCredentials(ctx context.Context, vaultID string, l store.ListQuery) ([]store.Item[store.Credential], error) {
	var q query
	q.and("vault_id = " + q.arg(vaultID))
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	out, err := queryCredentials(ctx, s.pool, `SELECT pos, body, sealed FROM vault_credentials`+q.page("pos", l), q.args...)
	if err != nil {
		return nil, err
	}
	if backwards(l) {
		reverse(out)
	}
	return out, nil
}

// DeleteCredential implements store.Vaults.
func (s *Store) DeleteCredential(ctx context.Context, vaultID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM vault_credentials WHERE id = $1 AND vault_id = $2`, id, vaultID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("credential %s in vault %s: %w", id, vaultID, store.ErrNotFound)
	}
	return nil
}
