package main

import (
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/httpapi"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/store/sqlite"
)

func newKeysCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage API keys (works on the data dir directly)",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", envOr("REINS_DATA_DIR", defaultDataDir()), "data directory (REINS_DATA_DIR)")
	open := func(ctx context.Context) (*sqlite.Store, error) {
		return sqlite.Open(ctx, filepath.Join(dataDir, app.DBFile))
	}
	var name string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API key and print it (shown once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			key, k, err := httpapi.CreateKey(cmd.Context(), st, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created %s (%s); the key is shown once:\n", k.ID, k.Name)
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "a name to recognise the key by")
	list := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never the secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
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
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an API key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.RevokeAPIKey(cmd.Context(), args[0], time.Now()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
