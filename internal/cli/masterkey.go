package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/internal/ops"
	"github.com/reinsdev/reins/internal/vault"
)

func newMasterKeyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "master-key",
		Short: "Manage the master key vault secrets are sealed under",
	}
	cmd.AddCommand(newMasterKeyRotateCommand())
	return cmd
}

func newMasterKeyRotateCommand() *cobra.Command {
	var dataDir, databaseURL string
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Seal every secret again under a new master key, in one transaction (servers stopped)",
		Long: `Seal every secret kept under the master key (vault credentials, sessions'
repository tokens) again under a new key, in one transaction that also
records the new key's id, then the egress CA keys of the data dir, and
install the new key. No server may run on the database meanwhile: with
SQLite the data dir's lock keeps one off; with PostgreSQL stop every
replica first (docs/operations.md says how to roll the key to them).

The new key is supplied the way the current one is:
  - current key in <data-dir>/master-key (the default): a new key is
    generated and installed there; the old one is kept as
    master-key.<old id>.old, for the backups made before the rotation.
  - current key in REINS_MASTER_KEY: set REINS_NEW_MASTER_KEY to the new
    key (32 random bytes, base64); once the rotation succeeds, start every
    server with REINS_MASTER_KEY set to it.

A rotation that was interrupted is completed by running it again with the
same keys.`,
		Example: `  reins master-key rotate --data-dir /srv/reins
  REINS_MASTER_KEY=$OLD REINS_NEW_MASTER_KEY=$(head -c 32 /dev/urandom | base64) \
    reins master-key rotate --database-url postgres://reins@db/reins`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := ops.RotateMasterKey(cmd.Context(), ops.Rotation{
				DataDir: dataDir, DatabaseURL: databaseURL,
				CurrentEnv: os.Getenv(vault.EnvKey), NewEnv: os.Getenv(ops.NewKeyEnv),
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if r.AlreadyDone {
				fmt.Fprintf(w, "the database was already sealed under the new key (id %s): finished the interrupted rotation\n", r.NewKeyID)
			} else {
				fmt.Fprintf(w, "resealed %d secrets from master key %s to %s\n", r.Resealed, r.OldKeyID, r.NewKeyID)
			}
			if r.CAFiles > 0 {
				fmt.Fprintf(w, "resealed %d egress CA keys in %s/ca\n", r.CAFiles, dataDir)
			}
			if r.KeyFile != "" {
				fmt.Fprintf(w, "installed the new key in %s; the old one is kept in %s for the backups made before now\n", r.KeyFile, r.OldKeyFile)
			} else {
				fmt.Fprintf(w, "start every server on this database with %s set to the value of %s (id %s)\n", vault.EnvKey, ops.NewKeyEnv, r.NewKeyID)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", envOr("REINS_DATA_DIR", defaultDataDir()), "data directory of the server (REINS_DATA_DIR)")
	f.StringVar(&databaseURL, "database-url", "", "the server's PostgreSQL database, instead of the data dir's SQLite (REINS_DATABASE_URL)")
	bindEnv(f, envFallback{"database-url", "REINS_DATABASE_URL"})
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error { return applyEnv(cmd.Flags()) }
	return cmd
}
