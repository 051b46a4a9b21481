package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// CreateVault implements store.Vaults.
func (s *Store) CreateVault(ctx context.Context, v ma.Vault) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.withAudit(ctx, func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO vaults (id, created_at, archived, body, workspace_id) VALUES (?, ?, ?, ?, ?)`,
			v.ID, unixOf(v.CreatedAt), v.ArchivedAt != nil, body, workspaceOf(ctx))
		if err != nil {
			return s.conflict(err, "vault "+v.ID)
		}
		return s.emitWebhooks(ctx, tx, workspaceOf(ctx), v.ID, "vault.created")
	})
}

// getVault reads a vault of ctx's workspace; lock ends the query.
func getVault(ctx context.Context, db Querier, id, lock string) (ma.Vault, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	v, err := scanJSON[ma.Vault](db.QueryRow(ctx, `SELECT body FROM vaults WHERE id = ?`+cond+lock, append([]any{id}, args...)...))
	return v, notFound(err, "vault", id)
}

// GetVault implements store.Vaults.
func (s *Store) GetVault(ctx context.Context, id string) (ma.Vault, error) {
	return getVault(ctx, s.r, id, "")
}

func putVault(ctx context.Context, tx Querier, v ma.Vault) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE vaults SET archived = ?, body = ? WHERE id = ?`, v.ArchivedAt != nil, body, v.ID)
	return err
}

// UpdateVault implements store.Vaults.
func (s *Store) UpdateVault(ctx context.Context, id string, fn func(*ma.Vault) error) (ma.Vault, error) {
	var out ma.Vault
	err := s.withAudit(ctx, func(tx Querier) error {
		v, err := getVault(ctx, tx, id, s.lock(LockUpdate))
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
	err := s.withAudit(ctx, func(tx Querier) error {
		v, err := getVault(ctx, tx, id, s.lock(LockUpdate))
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
		if err := s.emitChange(ctx, tx, "vaults", "vault", id, nil, v.ArchivedAt, false); err != nil {
			return err
		}
		return s.archiveCredentials(ctx, tx, id, at)
	})
	return out, err
}

// archiveCredentials archives the live credentials of a vault.
func (s *Store) archiveCredentials(ctx context.Context, tx Querier, vaultID, at string) error {
	creds, err := collect(ctx, tx, scanCredential, `SELECT pos, `+credentialColumns+` FROM vault_credentials WHERE vault_id = ? AND NOT archived`+s.lock(LockUpdate), vaultID)
	if err != nil {
		return err
	}
	for _, it := range creds {
		c := it.Value
		c.ArchivedAt, c.UpdatedAt = &at, at
		if err := s.putCredential(ctx, tx, &c); err != nil {
			return err
		}
	}
	return nil
}

// ListVaults implements store.Vaults.
func (s *Store) ListVaults(ctx context.Context, l store.ListQuery) ([]store.Item[ma.Vault], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	return list(ctx, s.r, scanItem[ma.Vault], `SELECT pos, body FROM vaults`, "pos", &q, l)
}

// DeleteVault implements store.Vaults.
func (s *Store) DeleteVault(ctx context.Context, id string) error {
	return s.withAudit(ctx, func(tx Querier) error {
		if _, err := getVault(ctx, tx, id, s.lock(LockUpdate)); err != nil {
			return err
		}
		// Explicit, so deletion does not depend on ON DELETE CASCADE (or
		// on SQLite's foreign_keys pragma).
		if _, err := tx.Exec(ctx, `DELETE FROM vault_credentials WHERE vault_id = ?`, id); err != nil {
			return err
		}
		return s.deleteEmitting(ctx, tx, "vaults", "vault", id)
	})
}

// matchKey is what must be unique among a vault's live credentials.
func matchKey(c ma.Credential) string {
	if c.Auth.Type == ma.AuthEnvVar {
		return c.Auth.SecretName
	}
	return c.Auth.MCPServerURL
}

func credentialConflict(c ma.Credential) string {
	if c.Auth.Type == ma.AuthEnvVar {
		return fmt.Sprintf("credential with secret_name %q in vault %s", c.Auth.SecretName, c.VaultID)
	}
	return fmt.Sprintf("credential for mcp_server_url %q in vault %s", c.Auth.MCPServerURL, c.VaultID)
}

// kindClass groups the MCP kinds: one live credential per server URL,
// whatever its kind.
func kindClass(c ma.Credential) string {
	if c.Auth.Type == ma.AuthEnvVar {
		return "env"
	}
	return "mcp"
}

// sealedBytes keeps a nil blob from becoming NULL in the NOT NULL column.
func sealedBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// CreateCredential implements store.Vaults.
func (s *Store) CreateCredential(ctx context.Context, c store.Credential) error {
	body, err := json.Marshal(c.Credential)
	if err != nil {
		return err
	}
	return s.withAudit(ctx, func(tx Querier) error {
		// LockShare keeps the vault from being deleted meanwhile.
		if _, err := getVault(ctx, tx, c.VaultID, s.lock(LockShare)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO vault_credentials (id, vault_id, kind, match_key, archived, body, sealed) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.VaultID, kindClass(c.Credential), matchKey(c.Credential), c.ArchivedAt != nil, body, sealedBytes(c.Sealed))
		return s.conflict(err, credentialConflict(c.Credential))
	})
}

// credentialColumns are the columns scanCredentialRow reads.
const credentialColumns = `body, sealed, version, refresh_until`

// getCredential reads a credential of a vault of ctx's workspace; lock
// ends the query.
func getCredential(ctx context.Context, db Querier, vaultID, id, lock string) (store.Credential, error) {
	cond, args := inParentWorkspace(ctx, "vault_id", "vaults")
	c, err := scanCredentialRow(db.QueryRow(ctx, `SELECT `+credentialColumns+` FROM vault_credentials WHERE id = ? AND vault_id = ?`+cond+lock,
		append([]any{id, vaultID}, args...)...))
	return c, notFound(err, "credential "+id+" in vault", vaultID)
}

// scanCredentialRow scans the credentialColumns of a row, after dest.
func scanCredentialRow(row Row, dest ...any) (store.Credential, error) {
	var c store.Credential
	var body []byte
	var until int64
	if err := row.Scan(append(dest, &body, &c.Sealed, &c.Version, &until)...); err != nil {
		return c, err
	}
	if until != 0 {
		c.RefreshUntil = time.Unix(0, until).UTC()
	}
	return c, json.Unmarshal(body, &c.Credential)
}

// putCredential writes c at the next version, which it sets.
func (s *Store) putCredential(ctx context.Context, tx Querier, c *store.Credential) error {
	body, err := json.Marshal(c.Credential)
	if err != nil {
		return err
	}
	var until int64
	if !c.RefreshUntil.IsZero() {
		until = c.RefreshUntil.UnixNano()
	}
	_, err = tx.Exec(ctx, `UPDATE vault_credentials SET kind = ?, match_key = ?, archived = ?, body = ?, sealed = ?, version = version + 1, refresh_until = ? WHERE id = ?`,
		kindClass(c.Credential), matchKey(c.Credential), c.ArchivedAt != nil, body, sealedBytes(c.Sealed), until, c.ID)
	if err != nil {
		return s.conflict(err, credentialConflict(c.Credential))
	}
	c.Version++
	return nil
}

// GetCredential implements store.Vaults.
func (s *Store) GetCredential(ctx context.Context, vaultID, id string) (store.Credential, error) {
	return getCredential(ctx, s.r, vaultID, id, "")
}

// UpdateCredential implements store.Vaults.
func (s *Store) UpdateCredential(ctx context.Context, vaultID, id string, fn func(*store.Credential) error) (store.Credential, error) {
	var out store.Credential
	err := s.withAudit(ctx, func(tx Querier) error {
		c, err := getCredential(ctx, tx, vaultID, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		if err := fn(&c); err != nil {
			return err
		}
		c.ID, c.VaultID = id, vaultID
		if err := s.putCredential(ctx, tx, &c); err != nil {
			return err
		}
		out = c
		return nil
	})
	return out, err
}

// SwapCredential implements store.Vaults.
func (s *Store) SwapCredential(ctx context.Context, vaultID, id string, version int64, fn func(*store.Credential) error) (store.Credential, error) {
	return s.UpdateCredential(ctx, vaultID, id, func(c *store.Credential) error {
		if c.Version != version {
			return fmt.Errorf("credential %s is at version %d, not %d: %w", id, c.Version, version, store.ErrConflict)
		}
		return fn(c)
	})
}

// scanCredential scans a row (pos, then credentialColumns).
func scanCredential(row Row) (store.Item[store.Credential], error) {
	var it store.Item[store.Credential]
	var err error
	it.Value, err = scanCredentialRow(row, &it.Pos)
	return it, err
}

// ListCredentials implements store.Vaults.
func (s *Store) ListCredentials(ctx context.Context, vaultID string, l store.ListQuery) ([]store.Item[store.Credential], error) {
	var q query
	q.and("vault_id = ?", vaultID)
	q.scopeParent(ctx, "vault_id", "vaults")
	if !l.IncludeArchived {
		q.and("NOT archived")
	}
	return list(ctx, s.r, scanCredential, `SELECT pos, `+credentialColumns+` FROM vault_credentials`, "pos", &q, l)
}

// DeleteCredential implements store.Vaults.
func (s *Store) DeleteCredential(ctx context.Context, vaultID, id string) error {
	cond, args := inParentWorkspace(ctx, "vault_id", "vaults")
	return s.withAudit(ctx, func(tx Querier) error {
		n, err := tx.Exec(ctx, `DELETE FROM vault_credentials WHERE id = ? AND vault_id = ?`+cond, append([]any{id, vaultID}, args...)...)
		if err == nil && n == 0 {
			return fmt.Errorf("credential %s in vault %s: %w", id, vaultID, store.ErrNotFound)
		}
		return err
	})
}
