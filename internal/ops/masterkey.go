package ops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/toolhost"
	"github.com/reinsdev/reins/internal/vault"
)

// NewKeyEnv is the environment variable that supplies the new master key
// (base64) of a rotation. It is required when the current key comes from
// REINS_MASTER_KEY: the new key is then kept where the operator keeps the
// current one.
const NewKeyEnv = "REINS_NEW_MASTER_KEY"

// nextKeyFile holds, in the data dir, the new key of a rotation in
// progress, until the rotation installs it as the master-key file.
const nextKeyFile = vault.KeyFile + ".next"

// Rotation says what a master-key rotation works on.
type Rotation struct {
	// DataDir is the data dir of the server (locked during the rotation);
	// DatabaseURL, if set, is its PostgreSQL database instead of the
	// SQLite file in DataDir.
	DataDir, DatabaseURL string
	// CurrentEnv and NewEnv are the values of REINS_MASTER_KEY and
	// REINS_NEW_MASTER_KEY ("" when unset).
	CurrentEnv, NewEnv string
}

// Rotated describes a rotation.
type Rotated struct {
	OldKeyID, NewKeyID string
	// Resealed counts the secrets of the database sealed again under the
	// new key; CAFiles the egress CA keys of the data dir.
	Resealed, CAFiles int
	// KeyFile is where the new key was installed, and OldKeyFile where
	// the old one was kept; both "" when the keys come from the
	// environment (the operator installs the new one).
	KeyFile, OldKeyFile string
	// AlreadyDone is set when the database was already sealed under the
	// new key: a rotation interrupted after its commit was completed.
	AlreadyDone bool
}

// resealer is what a rotation needs of the store.
type resealer interface {
	ClaimSetting(ctx context.Context, name, value string) (string, error)
	ResealSecrets(ctx context.Context, fromKeyID, toKeyID string, reseal func(store.SealedRef, []byte) ([]byte, error)) (int, error)
	Close() error
}

// RotateMasterKey seals every secret of the database (vault credentials,
// repository tokens) again under a new master key, in one transaction that
// also records the new key's id, then the egress CA keys of the data dir,
// and installs the new key. No server may run on the database meanwhile:
// the data dir's lock keeps one off it with SQLite; with PostgreSQL the
// operator stops every replica first (docs/operations.md).
//
// The new key is r.NewEnv when set; else, when the current key comes from
// the data dir's key file, a new key is generated and kept in
// master-key.next until the commit, then installed as master-key, the old
// one being kept as master-key.<old id>.old (backups made before the
// rotation need it). Run again after an interruption, it completes the
// same rotation.
func RotateMasterKey(ctx context.Context, r Rotation) (Rotated, error) {
	var out Rotated
	if r.DatabaseURL == "" {
		// Checked first: a mistyped --data-dir is left as it was.
		if path := filepath.Join(r.DataDir, app.DBFile); !exists(path) {
			return out, fmt.Errorf("no reins database at %s: pass the --data-dir `reins serve` uses (REINS_DATA_DIR), or --database-url", path)
		}
	}
	if err := os.MkdirAll(r.DataDir, 0o700); err != nil {
		return out, err
	}
	lock, err := app.LockDataDir(r.DataDir)
	if err != nil {
		return out, err
	}
	defer lock.Release()
	cur, source, err := vault.ReadKey(r.CurrentEnv, r.DataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, fmt.Errorf("no master key: %s is unset and %s does not exist, so nothing was ever sealed here; check --data-dir", vault.EnvKey, source)
	}
	if err != nil {
		return out, err
	}
	next, err := newKey(r)
	if err != nil {
		return out, err
	}
	keys, err := vault.NewKeyring(next, cur) // seals under next, opens both
	if err != nil {
		return out, err
	}
	old, err := vault.NewKeyring(cur)
	if err != nil {
		return out, err
	}
	out.OldKeyID, out.NewKeyID = old.KeyID(), keys.KeyID()
	if out.OldKeyID == out.NewKeyID {
		return out, fmt.Errorf("the new master key is the current one (id %s)", out.OldKeyID)
	}
	if err := resealStore(ctx, r, keys, &out); err != nil {
		return out, err
	}
	if out.CAFiles, err = toolhost.ResealCAs(filepath.Join(r.DataDir, "ca"), keys); err != nil {
		return out, fmt.Errorf("the database is sealed under the new key, but the egress CA files are not (run the rotation again to finish): %w", err)
	}
	if r.NewEnv == "" {
		if err := installKey(r.DataDir, cur, &out); err != nil {
			return out, fmt.Errorf("the database is sealed under the new key, kept in %s, but it was not installed (run the rotation again to finish): %w", filepath.Join(r.DataDir, nextKeyFile), err)
		}
	}
	return out, nil
}

// newKey returns the rotation's new key: NewEnv, or the key file of an
// interrupted rotation, or a new key written to that file.
func newKey(r Rotation) ([]byte, error) {
	if r.NewEnv != "" {
		raw, err := vault.ParseKey(r.NewEnv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", NewKeyEnv, err)
		}
		return raw, nil
	}
	if r.CurrentEnv != "" {
		return nil, fmt.Errorf("the master key comes from %s, so the new one must be supplied the same way: set %s to a new key "+
			"(32 random bytes in base64, e.g. `head -c 32 /dev/urandom | base64`) and run the rotation again", vault.EnvKey, NewKeyEnv)
	}
	path := filepath.Join(r.DataDir, nextKeyFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		return vault.ParseKey(string(raw)) // an interrupted rotation's
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	key, err := vault.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := vault.WriteKeyFile(path, key); err != nil {
		return nil, err
	}
	return key, syncDir(r.DataDir)
}

// resealStore reseals the database's secrets under keys' primary key,
// unless an interrupted rotation did already.
func resealStore(ctx context.Context, r Rotation, keys *vault.Keyring, out *Rotated) error {
	st, err := openStore(ctx, r)
	if err != nil {
		return err
	}
	defer st.Close()
	// A database no server started on records no id yet: the current
	// key's is recorded, as a server's first start would.
	recorded, err := st.ClaimSetting(ctx, "vault_key_id", out.OldKeyID)
	if err != nil {
		return err
	}
	switch recorded {
	case out.NewKeyID:
		out.AlreadyDone = true
		return nil
	case out.OldKeyID:
	default:
		return fmt.Errorf("the database's secrets are sealed under the master key with id %s, neither the current key (id %s) nor the new one", recorded, out.OldKeyID)
	}
	out.Resealed, err = st.ResealSecrets(ctx, out.OldKeyID, out.NewKeyID, func(ref store.SealedRef, sealed []byte) ([]byte, error) {
		ad := ref.CredentialID
		if ad == "" {
			ad = sessions.RepositoryTokenAD(ref.SessionID, ref.ResourceID)
		}
		pt, err := keys.Open(sealed, ad)
		if err != nil {
			return nil, err
		}
		return keys.Seal(pt, ad)
	})
	if err != nil {
		return fmt.Errorf("reseal the secrets (nothing was changed): %w", err)
	}
	return nil
}

func openStore(ctx context.Context, r Rotation) (resealer, error) {
	if r.DatabaseURL != "" {
		return postgres.Open(ctx, r.DatabaseURL)
	}
	return sqlite.Open(ctx, filepath.Join(r.DataDir, app.DBFile))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// installKey keeps the old key as master-key.<id>.old and moves
// master-key.next over master-key: the data dir has a master-key file at
// every moment.
func installKey(dataDir string, old []byte, out *Rotated) error {
	out.KeyFile = filepath.Join(dataDir, vault.KeyFile)
	out.OldKeyFile = filepath.Join(dataDir, vault.KeyFile+"."+out.OldKeyID+".old")
	next := filepath.Join(dataDir, nextKeyFile)
	if _, err := os.Stat(next); errors.Is(err, fs.ErrNotExist) {
		return nil // installed by the interrupted run
	}
	if err := vault.WriteKeyFile(out.OldKeyFile, old); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Rename(next, out.KeyFile); err != nil {
		return err
	}
	return syncDir(dataDir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
