package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/internal/ops"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
)

func newBackupCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "backup <file>",
		Short: "Write a consistent copy of the server's SQLite store to a new file, while it runs",
		Long: `Write a consistent copy of the SQLite store in the data dir to a new file,
with SQLite's online backup API: the server may keep running and writing,
and the copy is the database as of one commit (the moment the backup
began). The file records the schema version and the id of the master key
the vault secrets are sealed under, never the key: keep the key
(<data-dir>/master-key or REINS_MASTER_KEY) safe apart from the backups,
a backup is of no use without it. Progress is printed on stderr.

A PostgreSQL store is backed up with pg_dump; see docs/operations.md.`,
		Example: `  reins backup /var/backups/reins-$(date +%F).db
  reins restore /var/backups/reins-2026-12-01.db --data-dir /srv/reins`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBackup(cmd, dataDir, args[0])
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", envOr("REINS_DATA_DIR", defaultDataDir()), "data directory of the server (REINS_DATA_DIR)")
	return cmd
}

func runBackup(cmd *cobra.Command, dataDir, file string) error {
	began := time.Now()
	p := &progress{w: cmd.ErrOrStderr(), every: time.Second}
	snap, err := ops.Backup(cmd.Context(), dataDir, file, version(), sqlite.BackupOptions{Progress: p.report})
	if err != nil {
		return err
	}
	p.done(snap.Pages)
	var size int64
	if fi, err := os.Stat(file); err == nil {
		size = fi.Size()
	}
	key := snap.VaultKeyID
	if key == "" {
		key = "none recorded yet"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s: %d pages, %s, schema version %d, master key id %s, in %s\n",
		dataDir, file, snap.Pages, humanBytes(size), snap.SchemaVersion, key, time.Since(began).Round(time.Millisecond))
	fmt.Fprintf(cmd.ErrOrStderr(), "the master key is not in the backup: keep %s/%s (or %s) with id %s safe apart from it\n",
		dataDir, vault.KeyFile, vault.EnvKey, key)
	return nil
}

// progress prints a backup's progress at most every so often.
type progress struct {
	w     io.Writer
	every time.Duration
	last  time.Time
	shown bool
}

func (p *progress) report(copied, total int) {
	if time.Since(p.last) < p.every || copied == total {
		return
	}
	p.last, p.shown = time.Now(), true
	fmt.Fprintf(p.w, "backup: %d%% (%d of %d pages)\n", copied*100/total, copied, total)
}

func (p *progress) done(total int) {
	if p.shown {
		fmt.Fprintf(p.w, "backup: 100%% (%d of %d pages)\n", total, total)
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func newRestoreCommand() *cobra.Command {
	var (
		dataDir string
		replace bool
	)
	cmd := &cobra.Command{
		Use:   "restore <file>",
		Short: "Check a backup and install it as the data dir's database (no server may run on it)",
		Long: `Check a file written by reins backup and install it as the SQLite database
of the data dir. No server may run on the data dir meanwhile (its lock is
taken; a running server is named). The file must pass SQLite's integrity
check, have a schema no newer than this binary knows (an older one is
migrated when the server starts), and its vault secrets must be sealed
under the master key a server on the data dir will run with:
REINS_MASTER_KEY, else <data-dir>/master-key. When that key is missing or
another, nothing is changed and the message says which key id is needed
and where to put it. A database already in the data dir is replaced only
with --replace, and kept beside it as reins.db.replaced-<time>.

A PostgreSQL store is restored with pg_restore; see docs/operations.md.`,
		Example: `  cp /safe/place/master-key /srv/reins/master-key   # the key the backup was made under
  reins restore /var/backups/reins-2026-12-01.db --data-dir /srv/reins`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := ops.Restore(cmd.Context(), args[0], dataDir, os.Getenv(vault.EnvKey), replace)
			if err != nil {
				return err
			}
			if r.Replaced != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "the database that was there is kept as %s\n", r.Replaced)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s (made %s, schema version %d) into %s; start reins serve --data-dir %s\n",
				args[0], r.CreatedAt, r.SchemaVersion, dataDir, dataDir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", envOr("REINS_DATA_DIR", defaultDataDir()), "data directory to restore into (REINS_DATA_DIR)")
	cmd.Flags().BoolVar(&replace, "replace", false, "replace the data dir's database, keeping it aside")
	return cmd
}
