package store

import (
	"context"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// Vaults stores vaults and their credentials. A credential's secrets are
// kept only as the sealed blob the caller gives (see package vault); the
// store never sees them in clear.
//
// Among the live (not archived) credentials of one vault, MCP server URLs
// and environment variable names are unique: creating or un-archiving a
// second one is ErrConflict.
type Vaults interface {
	CreateVault(ctx context.Context, v ma.Vault) error
	GetVault(ctx context.Context, id string) (ma.Vault, error)
	// UpdateVault reads the vault, calls fn and writes it back, atomically.
	// An error from fn is returned as is and nothing is written.
	UpdateVault(ctx context.Context, id string, fn func(cur *ma.Vault) error) (ma.Vault, error)
	ListVaults(ctx context.Context, q ListQuery) ([]Item[ma.Vault], error)
	// ArchiveVault sets archived_at (once) on the vault and on its live
	// credentials.
	ArchiveVault(ctx context.Context, id string, at string) (ma.Vault, error)
	// DeleteVault removes the vault and all its credentials.
	DeleteVault(ctx context.Context, id string) error

	// CreateCredential stores a credential of an existing vault
	// (ErrNotFound otherwise).
	CreateCredential(ctx context.Context, c Credential) error
	// GetCredential returns a credential of the vault.
	GetCredential(ctx context.Context, vaultID, id string) (Credential, error)
	// UpdateCredential reads the credential, calls fn and writes it back,
	// atomically, at the next Version. An error from fn is returned as is.
	UpdateCredential(ctx context.Context, vaultID, id string, fn func(cur *Credential) error) (Credential, error)
	// SwapCredential is UpdateCredential if the credential is still at
	// version (compare-and-swap): otherwise it calls no fn, writes nothing
	// and returns an error wrapping ErrConflict, and the caller reads the
	// credential again.
	SwapCredential(ctx context.Context, vaultID, id string, version int64, fn func(cur *Credential) error) (Credential, error)
	// ListCredentials lists a vault's credentials in creation order.
	ListCredentials(ctx context.Context, vaultID string, q ListQuery) ([]Item[Credential], error)
	// DeleteCredential removes a credential of the vault.
	DeleteCredential(ctx context.Context, vaultID, id string) error
}

// Credential is a stored credential: its API object (no secrets) and its
// sealed secrets.
type Credential struct {
	ma.Credential
	// Sealed is the encrypted secret blob (vault.Keyring.SealSecrets).
	Sealed []byte
	// Version counts the credential's writes, from 0 when it is created;
	// the store sets it.
	Version int64
	// RefreshUntil, while it is in the future, says that a process has
	// claimed the refresh of the credential's OAuth token until then
	// (connector.VaultCredentials); the zero time when none has.
	RefreshUntil time.Time
}
