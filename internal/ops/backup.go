// Package ops holds an operator's procedures on a reins data dir and
// database: the online backup of a SQLite store and its restore, and the
// rotation of the master key that vault secrets are sealed under. The CLI
// (reins backup, reins restore, reins master-key rotate) is a thin layer
// over it.
package ops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
)

// backupFormat is the version of the backup file's layout (a SQLite
// database with a reins_backup manifest table).
const backupFormat = "1"

// Backup writes a consistent copy of the SQLite store of dataDir, which a
// server may be running on, to the new file dst (see sqlite.Backup), with
// a manifest naming the schema version, the master key's id (never the
// key) and version (the reins that made it). o.Manifest is replaced.
func Backup(ctx context.Context, dataDir, dst, version string, o sqlite.BackupOptions) (sqlite.Snapshot, error) {
	src := filepath.Join(dataDir, app.DBFile)
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return sqlite.Snapshot{}, fmt.Errorf("no reins database at %s: pass the --data-dir `reins serve` uses (REINS_DATA_DIR); "+
			"a PostgreSQL store is backed up with pg_dump (docs/operations.md)", src)
	}
	o.Manifest = map[string]string{
		"format":        backupFormat,
		"created_at":    time.Now().UTC().Format(time.RFC3339),
		"reins_version": version,
		"source":        src,
	}
	return sqlite.Backup(ctx, src, dst, o)
}

// Restored describes a restore.
type Restored struct {
	// SchemaVersion is the backup's schema version; a server started on
	// the data dir migrates it to its own.
	SchemaVersion int
	// VaultKeyID is the id of the master key the backup's secrets are
	// sealed under, "" when it recorded none.
	VaultKeyID string
	// CreatedAt is when the backup was made, as its manifest says.
	CreatedAt string
	// Replaced is where the database the restore replaced was moved,
	// "" when the data dir had none.
	Replaced string
}

// Restore checks the backup file src and installs it as the database of
// dataDir, which must have no server running (it takes the data dir's
// lock). It refuses a file that fails SQLite's integrity check, is not a
// reins backup, has a schema newer than this binary knows, or whose
// secrets are sealed under another master key than the one a server on
// dataDir would run with (envKey, the value of REINS_MASTER_KEY, else
// <dataDir>/master-key): the error says how to supply the right one. An
// existing database is moved aside (to reins.db.replaced-<time>, with its
// -wal and -shm files) only if replace is set.
func Restore(ctx context.Context, src, dataDir, envKey string, replace bool) (Restored, error) {
	var r Restored
	m, err := sqlite.ReadBackup(ctx, src)
	if err != nil {
		return r, fmt.Errorf("restore: %w", err)
	}
	if m["format"] != backupFormat {
		return r, fmt.Errorf("restore: %s is a backup of format %q, this reins reads %q", src, m["format"], backupFormat)
	}
	r.VaultKeyID, r.CreatedAt = m["vault_key_id"], m["created_at"]
	if r.SchemaVersion, err = strconv.Atoi(m["schema_version"]); err != nil {
		return r, fmt.Errorf("restore: %s: bad schema version %q", src, m["schema_version"])
	}
	if known := sqlite.SchemaVersion(); r.SchemaVersion > known {
		return r, fmt.Errorf("restore: the backup's schema is at version %d, newer than this reins binary knows (version %d): restore it with the reins that made it (%s)",
			r.SchemaVersion, known, m["reins_version"])
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return r, fmt.Errorf("restore: %w", err)
	}
	lock, err := app.LockDataDir(dataDir)
	if err != nil {
		return r, fmt.Errorf("restore: %w", err)
	}
	defer lock.Release()
	if err := checkKey(r.VaultKeyID, envKey, dataDir); err != nil {
		return r, fmt.Errorf("restore: %w", err)
	}
	dst := filepath.Join(dataDir, app.DBFile)
	if r.Replaced, err = moveAside(dst, replace); err != nil {
		return r, fmt.Errorf("restore: %w", err)
	}
	if err := sqlite.InstallBackup(ctx, src, dst); err != nil {
		return r, fmt.Errorf("restore: %w", err)
	}
	return r, nil
}

// checkKey checks that the master key a server on dataDir would run with
// has the id want ("" accepts any).
func checkKey(want, envKey, dataDir string) error {
	if want == "" {
		return nil
	}
	raw, source, err := vault.ReadKey(envKey, dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the backup's vault secrets are sealed under the master key with id %s, and %s has no master key: "+
			"copy the master-key file kept with the backup's data dir to %s (mode 0600), or set %s to that key, and run restore again",
			want, dataDir, filepath.Join(dataDir, vault.KeyFile), vault.EnvKey)
	}
	if err != nil {
		return err
	}
	keys, err := vault.NewKeyring(raw)
	if err != nil {
		return err
	}
	if keys.KeyID() != want {
		return fmt.Errorf("the backup's vault secrets are sealed under the master key with id %s, but the key a server here would run with (from %s) has id %s: "+
			"supply the key the backup was made with, in %s or %s (a key rotated since the backup is in master-key.<id>.old next to the new one)",
			want, source, keys.KeyID(), filepath.Join(dataDir, vault.KeyFile), vault.EnvKey)
	}
	return nil
}

// moveAside renames the database file db and its -wal and -shm files to
// db.replaced-<time>… when replace is set, and returns the new name; it
// fails when db exists and replace is not set.
func moveAside(db string, replace bool) (string, error) {
	if _, err := os.Lstat(db); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if !replace {
		return "", fmt.Errorf("%s exists; pass --replace to move it aside and restore in its place", db)
	}
	aside := db + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
	// The write-ahead log goes with the database: without it the commits
	// not yet checkpointed into the file would be lost.
	for _, suffix := range []string{"-wal", "-shm", ""} {
		err := os.Rename(db+suffix, aside+suffix)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return aside, nil
}
