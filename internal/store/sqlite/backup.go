package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
)

// manifestTable holds, in a backup file, what goes with the copy: the
// schema version, the master key's id and what the caller adds. Restore
// drops it.
const manifestTable = "reins_backup"

// defaultStepPages is how many pages a backup step copies (4 MiB of
// 4 KiB pages) between progress reports.
const defaultStepPages = 1024

// BackupOptions tune Backup.
type BackupOptions struct {
	// Manifest is recorded in the copy, with the schema version and the
	// master key's id.
	Manifest map[string]string
	// Progress, if not nil, is called after every step with the pages
	// copied and the total.
	Progress func(copied, total int)
	// StepPages is how many pages a step copies (default 1024).
	StepPages int
}

// A Snapshot is what Backup read from the database, in the same read
// transaction as the pages it copied.
type Snapshot struct {
	// SchemaVersion is the highest migration recorded.
	SchemaVersion int
	// VaultKeyID is the id of the master key the vault secrets are sealed
	// under ("" when no server recorded one yet).
	VaultKeyID string
	// Pages is the number of pages copied.
	Pages int
}

// Backup copies the database at src, which a server may be writing, into
// the new file dst with SQLite's online backup API, and records a manifest
// (o.Manifest, the schema version and the master key's id) in it. Every
// page is copied from one read transaction, so the copy is the database as
// of one commit however long it takes, and concurrent writers are not
// blocked (the write-ahead log grows meanwhile). dst is written as
// dst+".partial", synced and renamed, so that it never holds half a copy.
func Backup(ctx context.Context, src, dst string, o BackupOptions) (Snapshot, error) {
	var snap Snapshot
	if _, err := os.Stat(src); err != nil {
		return snap, fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Lstat(dst); err == nil {
		return snap, fmt.Errorf("backup: %s exists; choose a new file", dst)
	}
	partial := dst + ".partial"
	os.Remove(partial)
	defer os.Remove(partial)
	// The copy holds what the database holds: only its owner reads it.
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return snap, fmt.Errorf("backup: %w", err)
	}
	f.Close()
	if o.StepPages <= 0 {
		o.StepPages = defaultStepPages
	}
	snap, err = copyPages(ctx, src, partial, o)
	if err != nil {
		return snap, fmt.Errorf("backup: %w", err)
	}
	m := map[string]string{"schema_version": fmt.Sprint(snap.SchemaVersion), "vault_key_id": snap.VaultKeyID}
	for k, v := range o.Manifest {
		m[k] = v
	}
	if err := writeManifest(ctx, partial, m); err != nil {
		return snap, fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(partial); err != nil {
		return snap, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(partial, dst); err != nil {
		return snap, fmt.Errorf("backup: %w", err)
	}
	return snap, syncDir(filepath.Dir(dst))
}

// backuper is the modernc.org/sqlite connection's backup API.
type backuper interface {
	NewBackup(dstURI string) (*sqlite.Backup, error)
}

// copyPages copies src into the new file dst from one read transaction.
func copyPages(ctx context.Context, src, dst string, o BackupOptions) (Snapshot, error) {
	var snap Snapshot
	db, err := sql.Open("sqlite", "file:"+src+"?"+pragmas("busy_timeout(10000)", "query_only(1)"))
	if err != nil {
		return snap, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return snap, err
	}
	defer conn.Close()
	// The read transaction pins one snapshot: the backup steps read it
	// instead of restarting at every commit of the server's writer.
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		return snap, err
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&snap.SchemaVersion); err != nil {
		return snap, fmt.Errorf("read the schema version of %s (is it a reins database?): %w", src, err)
	}
	err = conn.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'vault_key_id'`).Scan(&snap.VaultKeyID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return snap, fmt.Errorf("read the master key id: %w", err)
	}
	err = conn.Raw(func(dc any) error {
		b, err := dc.(backuper).NewBackup(dst)
		if err != nil {
			return err
		}
		for more := true; more; {
			if err := ctx.Err(); err != nil {
				b.Finish()
				return err
			}
			if more, err = b.Step(int32(o.StepPages)); err != nil {
				b.Finish()
				return err
			}
			snap.Pages = b.PageCount()
			if o.Progress != nil {
				o.Progress(snap.Pages-b.Remaining(), snap.Pages)
			}
		}
		return b.Finish()
	})
	return snap, err
}

// writeManifest records m in dst's manifest table and makes dst one
// self-contained file (rollback journal, not WAL).
func writeManifest(ctx context.Context, dst string, m map[string]string) error {
	db, err := sql.Open("sqlite", "file:"+dst)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `PRAGMA journal_mode=DELETE`); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+manifestTable+` (name TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		return err
	}
	for k, v := range m {
		if _, err := db.ExecContext(ctx, `INSERT INTO `+manifestTable+` (name, value) VALUES (?, ?)`, k, v); err != nil {
			return err
		}
	}
	return db.Close()
}

// ReadBackup checks the backup file at path (SQLite's integrity check) and
// returns its manifest. A file that is not a reins backup (no manifest) or
// fails the check is an error. The file is only read.
func ReadBackup(ctx context.Context, path string) (map[string]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+pragmas("query_only(1)"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var problems []string
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return nil, fmt.Errorf("%s is not a SQLite database: %w", path, err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return nil, err
		}
		problems = append(problems, s)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("integrity check of %s: %w", path, err)
	}
	if len(problems) != 1 || problems[0] != "ok" {
		return nil, fmt.Errorf("integrity check of %s failed: %s", path, strings.Join(problems, "; "))
	}
	m := map[string]string{}
	rows, err = db.QueryContext(ctx, `SELECT name, value FROM `+manifestTable)
	if err != nil {
		return nil, fmt.Errorf("%s is not a reins backup (no manifest; make one with reins backup): %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, rows.Err()
}

// InstallBackup copies the backup file src to the new database file dst
// (which must not exist), without its manifest, and syncs it. The caller
// checked src with ReadBackup and owns dst's directory (no server runs on
// it).
func InstallBackup(ctx context.Context, src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists", dst)
	}
	tmp := dst + ".restoring"
	os.Remove(tmp)
	defer os.Remove(tmp)
	if err := copyFile(src, tmp); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+tmp)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, `DROP TABLE IF EXISTS `+manifestTable)
	if err := errors.Join(err, db.Close()); err != nil {
		return fmt.Errorf("restore %s: %w", dst, err)
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

func pragmas(ps ...string) string {
	q := url.Values{}
	for _, p := range ps {
		q.Add("_pragma", p)
	}
	return q.Encode()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
