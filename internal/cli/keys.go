package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// keysStore is what the keys commands need of a store.
type keysStore interface {
	store.Keys
	Close() error
}

// keysTarget says which store the keys commands work on: the server's
// database, never a new one.
type keysTarget struct {
	dataDir, databaseURL string
}

// open opens the server's store: PostgreSQL with --database-url, else the
// SQLite database in the data dir, which must exist. A missing database
// is refused: a key made in a new one would be accepted by no server.
func (t *keysTarget) open(ctx context.Context) (keysStore, error) {
	if t.databaseURL != "" {
		st, err := postgres.Open(ctx, t.databaseURL)
		if err != nil {
			return nil, fmt.Errorf("open --database-url: %w", err)
		}
		return st, nil
	}
	path := filepath.Join(t.dataDir, app.DBFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no reins database at %s: API keys are kept in the server's store; "+
			"pass the --data-dir `reins serve` uses (REINS_DATA_DIR), or --database-url for a PostgreSQL store", path)
	}
	return sqlite.Open(ctx, path)
}

// with runs fn on the opened store.
func (t *keysTarget) with(fn func(cmd *cobra.Command, args []string, st keysStore) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		st, err := t.open(cmd.Context())
		if err != nil {
			return err
		}
		defer st.Close()
		return fn(cmd, args, st)
	}
}

func newKeysCommand() *cobra.Command {
	t := &keysTarget{}
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage API keys in the server's store (the data dir, or --database-url)",
		Long: `Manage the API keys of a reins server. These commands work on the server's
store directly: the SQLite database in the data dir, or the PostgreSQL
database of --database-url, so they need no key and no running server (the
first key of a deployment is made this way). A server that is running sees
the changes at once. The server also has an HTTP endpoint, /v1/api_keys
(list, create, POST /v1/api_keys/{id}/revoke: a reins extension the
console uses), open to any API key.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&t.dataDir, "data-dir", envOr("REINS_DATA_DIR", defaultDataDir()), "data directory of the server (REINS_DATA_DIR)")
	pf.StringVar(&t.databaseURL, "database-url", "", "the server's PostgreSQL database, instead of the data dir (REINS_DATABASE_URL)")
	bindEnv(pf, envFallback{"database-url", "REINS_DATABASE_URL"})
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyEnv(cmd.Flags())
	}
	cmd.AddCommand(keysCreate(t), keysList(t), keysRevoke(t))
	return cmd
}

func keysCreate(t *keysTarget) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print it (shown once)",
		Args:  cobra.NoArgs,
		RunE: t.with(func(cmd *cobra.Command, _ []string, st keysStore) error {
			key, k, err := httpapi.CreateKey(cmd.Context(), st, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created %s (%s); the key is shown once:\n", k.ID, k.Name)
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "a name to recognise the key by")
	return cmd
}

func keysList(t *keysTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List API keys (never the secrets)",
		Args:  cobra.NoArgs,
		RunE: t.with(func(cmd *cobra.Command, _ []string, st keysStore) error {
			keys, err := st.ListAPIKeys(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tENDS WITH\tCREATED\tSTATUS")
			for _, k := range keys {
				status := "active"
				if k.RevokedAt != nil {
					status = "revoked " + k.RevokedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t…%s\t%s\t%s\n", k.ID, k.Name, k.Hint, k.CreatedAt.Format(time.RFC3339), status)
			}
			return tw.Flush()
		}),
	}
}

func keysRevoke(t *keysTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an API key",
		Args:  cobra.ExactArgs(1),
		RunE: t.with(func(cmd *cobra.Command, args []string, st keysStore) error {
			err := st.RevokeAPIKey(cmd.Context(), args[0], time.Now())
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no API key %s (see `reins keys list`)", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		}),
	}
}
