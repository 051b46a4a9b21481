package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// keysStore is what the keys commands need of a store.
type keysStore interface {
	store.Keys
	store.Workspaces
	Close() error
}

// cliAudit is ctx carrying the audit entry of a change made from the
// command line (the store records it with the change).
func cliAudit(ctx context.Context, action, targetType, targetID, ws string, details map[string]string) context.Context {
	e := store.AuditEvent{ID: ids.New(ids.AuditEvent), At: time.Now().UTC(), Actor: "cli",
		Action: action, TargetType: targetType, TargetID: targetID, WorkspaceID: ws}
	e.Details, _ = json.Marshal(details)
	return store.WithAudit(ctx, e)
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
console uses), open to admin keys.

A key's role says what it can do: admin (everything, in any workspace),
developer (its workspace's resources) or read_only (reads them).`,
	}
	t.bindFlags(cmd)
	cmd.AddCommand(keysCreate(t), keysList(t), keysRevoke(t))
	return cmd
}

// checkKeyRole checks a new key's role and workspace in st.
func checkKeyRole(ctx context.Context, st keysStore, role, ws string) error {
	switch role {
	case store.RoleAdmin:
		if ws != "" {
			return fmt.Errorf("--workspace: an admin key works in every workspace (the anthropic-workspace-id header picks one); leave it out")
		}
		return nil
	case store.RoleDeveloper, store.RoleReadOnly:
	default:
		return fmt.Errorf("--role: admin, developer or read_only, not %q", role)
	}
	if ws == "" {
		return fmt.Errorf("--workspace: required for a %s key (see `reins workspaces list`)", role)
	}
	w, err := st.GetWorkspace(ctx, ws)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("--workspace: no workspace %s (see `reins workspaces list`)", ws)
	}
	if err == nil && w.ArchivedAt != nil {
		return fmt.Errorf("--workspace: workspace %s is archived", ws)
	}
	return err
}

func keysCreate(t *keysTarget) *cobra.Command {
	var name, role, ws string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print it (shown once)",
		Args:  cobra.NoArgs,
		RunE: t.with(func(cmd *cobra.Command, _ []string, st keysStore) error {
			if err := checkKeyRole(cmd.Context(), st, role, ws); err != nil {
				return err
			}
			key, k, err := httpapi.CreateKeyAs(cmd.Context(), cliKeys{st}, store.APIKey{Name: name, Role: role, WorkspaceID: ws})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created %s (%s); the key is shown once:\n", k.ID, k.Name)
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "a name to recognise the key by")
	cmd.Flags().StringVar(&role, "role", store.RoleAdmin, "what the key can do: admin, developer or read_only")
	cmd.Flags().StringVar(&ws, "workspace", "", "the workspace (wrkspc_…) of a developer or read_only key")
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
			fmt.Fprintln(tw, "ID\tNAME\tENDS WITH\tROLE\tWORKSPACE\tCREATED\tSTATUS")
			for _, k := range keys {
				status := k.Status
				if status == "" {
					status = store.KeyActive
				}
				if k.RevokedAt != nil {
					status = "revoked " + k.RevokedAt.Format(time.RFC3339)
				}
				role, ws := k.Role, k.WorkspaceID
				if role == "" {
					role = store.RoleAdmin
				}
				if ws == "" {
					ws = "(all)"
				}
				fmt.Fprintf(tw, "%s\t%s\t…%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Hint, role, ws, k.CreatedAt.Format(time.RFC3339), status)
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
			err := st.RevokeAPIKey(cliAudit(cmd.Context(), "api_key.revoked", "api_key", args[0], "", nil), args[0], time.Now())
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

// cliKeys creates keys with their audit entry.
type cliKeys struct{ st keysStore }

func (c cliKeys) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	return c.st.CreateAPIKey(cliAudit(ctx, "api_key.created", "api_key", k.ID, k.WorkspaceID,
		map[string]string{"name": k.Name, "role": k.Role}), k)
}

// bindFlags adds the flags naming the server's store (--data-dir,
// --database-url, and their environment variables) to cmd and its
// subcommands.
func (t *keysTarget) bindFlags(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&t.dataDir, "data-dir", envOr("REINS_DATA_DIR", defaultDataDir()), "data directory of the server (REINS_DATA_DIR)")
	pf.StringVar(&t.databaseURL, "database-url", "", "the server's PostgreSQL database, instead of the data dir (REINS_DATABASE_URL)")
	bindEnv(pf, envFallback{"database-url", "REINS_DATABASE_URL"})
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyEnv(cmd.Flags())
	}
}
