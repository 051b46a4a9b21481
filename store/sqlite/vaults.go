package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

var _ store.Vaults = (*Store)(nil)

// CreateVault implements store.Vaults.
func (s *Store) CreateVault(ctx context.Context, v ma.Vault) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO vaults (id, created_at, archived, body) VALUES (?, ?, ?, ?)`, v.ID, unixOf(v.CreatedAt), boolInt(v.ArchivedAt != nil), body)
	if isUnique(err) {
		return fmt.Errorf("vault %s: %w", v.ID, store.ErrConflict)
	}
	return err
}

func getVault(ctx context.Context, q querier, id string) (ma.Vault, error) {
	var body []byte
	if err := q.QueryRowContext(ctx, `SELECT body FROM vaults WHERE id = ?`, id).Scan(&body); err != nil {
		return ma.Vault{}, notFound(err, "vault", id)
	}
	var v ma.Vault
	err := json.Unmarshal(body, &v)
	return v, err
}

// GetVault implements store.Vaults.
func (s *Store) GetVault(ctx context.Context, id string) (ma.Vault, error) {
	return getVault(ctx, s.r, id)
}

func putVault(ctx context.Context, tx *sql.Tx, v ma.Vault) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE vaults SET archived = ?, body = ? WHERE id = ?`, boolInt(v.ArchivedAt != nil), body, v.ID)
	return err
}

// UpdateVault implements store.Vaults.
func (s *Store) UpdateVault(ctx context.Context, id string, fn func(*ma.Vault) error) (ma.Vault, error) {
	var out ma.Vault
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		v, err := getVault(ctx, tx, id)
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
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		v, err := getVault(ctx, tx, id)
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
		creds, err := queryCredentials(ctx, tx, `SELECT pos, body, sealed FROM vault_credentials WHERE vault_id = ? AND archived = 0`, id)
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
func (s *Store) ListVaults(ctx context.Context, q store.ListQuery) ([]store.Item[ma.Vault], error) {
	var where []string
	var args []any
	if !q.IncludeArchived {
		where = append(where, "archived = 0")
	}
	where, args, tail := page(where, args, "pos", q)
	return listItems[ma.Vault](ctx, s.r, `SELECT pos, body FROM vaults`+whereClause(where)+tail, args, q)
}

// DeleteVault implements store.Vaults.
func (s *Store) DeleteVault(ctx context.Context, id string) error {
	return s.withTx(ctx, func(tx *sql.Tx) error {
		// Explicit, so deletion does not depend on the foreign_keys pragma.
		if _, err := tx.ExecContext(ctx, `DELETE FROM vault_credentials WHERE vault_id = ?`, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM vaults WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("vault %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
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
	return s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := getVault(ctx, tx, c.VaultID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO vault_credentials (id, vault_id, kind, match_key, archived, body, sealed) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.VaultID, kindClass(c.Credential), matchKey(c.Credential), boolInt(c.ArchivedAt != nil), body, c.Sealed)
		if isUnique(err) {
			return credentialConflict(c.Credential)
		}
		return err
	})
}

func getCredential(ctx context.Context, q querier, vaultID, id string) (store.Credential, error) {
	var body, sealed []byte
	if err := q.QueryRowContext(ctx, `SELECT body, sealed FROM vault_credentials WHERE id = ? AND vault_id = ?`, id, vaultID).Scan(&body, &sealed); err != nil {
		return store.Credential{}, notFound(err, "credential "+id+" in vault", vaultID)
	}
	c := store.Credential{Sealed: sealed}
	err := json.Unmarshal(body, &c.Credential)
	return c, err
}

func putCredential(ctx context.Context, tx *sql.Tx, c store.Credential) error {
	body, err := json.Marshal(c.Credential)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE vault_credentials SET kind = ?, match_key = ?, archived = ?, body = ?, sealed = ? WHERE id = ?`,
		kindClass(c.Credential), matchKey(c.Credential), boolInt(c.ArchivedAt != nil), body, c.Sealed, c.ID)
	if isUnique(err) {
		return credentialConflict(c.Credential)
	}
	return err
}

// GetCredential implements store.Vaults.
func (s *Store) GetCredential(ctx context.Context, vaultID, id string) (store.Credential, error) {
	return getCredential(ctx, s.r, vaultID, id)
}

// UpdateCredential implements store.Vaults.
func (s *Store) UpdateCredential(ctx context.Context, vaultID, id string, fn func(*store.Credential) error) (store.Credential, error) {
	var out store.Credential
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		c, err := getCredential(ctx, tx, vaultID, id)
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

func queryCredentials(ctx context.Context, q querier, query string, args ...any) ([]store.Item[store.Credential], error) {
	rows, err := q.QueryContext(ctx, query, args...)
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
func (s *Store) ListCredentials(ctx context.Context, vaultID string, q store.ListQuery) ([]store.Item[store.Credential], error) {
	where := []string{"vault_id = ?"}
	args := []any{vaultID}
	if !q.IncludeArchived {
		where = append(where, "archived = 0")
	}
	where, args, tail := page(where, args, "pos", q)
	out, err := queryCredentials(ctx, s.r, `SELECT pos, body, sealed FROM vault_credentials`+whereClause(where)+tail, args...)
	if err != nil {
		return nil, err
	}
	if q.Before > 0 && q.After == 0 {
		reverse(out)
	}
	return out, nil
}

// DeleteCredential implements store.Vaults.
func (s *Store) DeleteCredential(ctx context.Context, vaultID, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM vault_credentials WHERE id = ? AND vault_id = ?`, id, vaultID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("credential %s in vault %s: %w", id, vaultID, store.ErrNotFound)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
