package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
)

// newWorkspacesCommand manages workspaces in the server's store, like
// `reins keys` (the Admin API's /v1/organizations/workspaces does the same
// over HTTP with an admin key).
func newWorkspacesCommand() *cobra.Command {
	t := &keysTarget{}
	cmd := &cobra.Command{
		Use:   "workspaces",
		Short: "Manage workspaces in the server's store (the data dir, or --database-url)",
		Long: `Manage the workspaces of a reins server, on its store directly like
` + "`reins keys`" + `. A workspace groups agents, environments, sessions, vaults,
files, skills and machines; a developer or read_only key sees only its own.`,
	}
	t.bindFlags(cmd)
	cmd.AddCommand(workspacesCreate(t), workspacesList(t), workspacesArchive(t))
	return cmd
}

func workspacesCreate(t *keysTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME",
		Short: "Create a workspace and print its id",
		Args:  cobra.ExactArgs(1),
		RunE: t.with(func(cmd *cobra.Command, args []string, st keysStore) error {
			if len(args[0]) > 40 {
				return fmt.Errorf("name: at most 40 characters")
			}
			w := store.Workspace{ID: ids.New(ids.Workspace), Name: args[0], DisplayColor: "#6C5BB9", CreatedAt: time.Now().UTC()}
			ctx := cliAudit(cmd.Context(), "workspace.created", "workspace", w.ID, "", map[string]string{"name": w.Name})
			if err := st.CreateWorkspace(ctx, w); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), w.ID)
			return nil
		}),
	}
}

func workspacesList(t *keysTarget) *cobra.Command {
	var archived bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workspaces, the default one included",
		Args:  cobra.NoArgs,
		RunE: t.with(func(cmd *cobra.Command, _ []string, st keysStore) error {
			items, err := st.ListWorkspaces(cmd.Context(), store.WorkspaceQuery{ListQuery: store.ListQuery{IncludeArchived: archived}, IncludeDefault: true})
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tCREATED\tARCHIVED")
			for _, it := range items {
				w, at := it.Value, "-"
				if w.ArchivedAt != nil {
					at = w.ArchivedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", w.ID, w.Name, w.CreatedAt.Format(time.RFC3339), at)
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().BoolVar(&archived, "archived", false, "list archived workspaces too")
	return cmd
}

func workspacesArchive(t *keysTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "archive WORKSPACE_ID",
		Short: "Archive a workspace (the default one cannot be)",
		Args:  cobra.ExactArgs(1),
		RunE: t.with(func(cmd *cobra.Command, args []string, st keysStore) error {
			if args[0] == store.DefaultWorkspace {
				return fmt.Errorf("%s is the default workspace and cannot be archived", args[0])
			}
			ctx := cliAudit(cmd.Context(), "workspace.archived", "workspace", args[0], "", nil)
			_, err := st.UpdateWorkspace(ctx, args[0], func(w *store.Workspace) error {
				if w.ArchivedAt == nil {
					now := time.Now().UTC()
					w.ArchivedAt = &now
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("archive %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "archived %s\n", args[0])
			return nil
		}),
	}
}
