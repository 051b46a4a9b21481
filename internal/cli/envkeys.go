package cli

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

// environmentKey is an environment key as the API lists it.
type environmentKey struct {
	ID        string  `json:"id"`
	Key       string  `json:"key,omitempty"`
	Hint      string  `json:"hint"`
	CreatedAt string  `json:"created_at"`
	RevokedAt *string `json:"revoked_at"`
}

// envKeys is `reins environments keys`: the keys executors and pull
// workers of a self-hosted environment connect with, over the API.
func envKeys(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage a self-hosted environment's keys (what executors and workers connect with)",
	}
	create := &cobra.Command{
		Use:   "create ENVIRONMENT_ID",
		Short: "Create an environment key and print it (shown once)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			var raw json.RawMessage
			if err := c.Execute(cmd.Context(), http.MethodPost, "v1/environments/"+args[0]+"/keys", map[string]any{}, &raw); err != nil {
				return err
			}
			if c.output == outputJSON {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), string(raw))
				return err
			}
			var k environmentKey
			if err := json.Unmarshal(raw, &k); err != nil {
				return fmt.Errorf("decode response: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created %s; the key is shown once:\n", k.ID)
			fmt.Fprintln(cmd.OutOrStdout(), k.Key)
			return nil
		}),
	}
	list := &cobra.Command{
		Use:   "list ENVIRONMENT_ID",
		Short: "List an environment's keys (never the secrets)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			var raw json.RawMessage
			if err := c.Execute(cmd.Context(), http.MethodGet, "v1/environments/"+args[0]+"/keys", nil, &raw); err != nil {
				return err
			}
			if c.output == outputJSON {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), string(raw))
				return err
			}
			var page struct{ Data []environmentKey }
			if err := json.Unmarshal(raw, &page); err != nil {
				return fmt.Errorf("decode response: %w", err)
			}
			t := newTable(cmd.OutOrStdout(), "ID", "ENDS WITH", "CREATED", "REVOKED")
			for _, k := range page.Data {
				revoked := "-"
				if k.RevokedAt != nil {
					revoked = *k.RevokedAt
				}
				t.row(k.ID, "…"+k.Hint, k.CreatedAt, revoked)
			}
			return t.flush()
		}),
	}
	revoke := &cobra.Command{
		Use:   "revoke ENVIRONMENT_ID KEY_ID",
		Short: "Revoke an environment key",
		Args:  cobra.ExactArgs(2),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			var raw json.RawMessage
			if err := c.Execute(cmd.Context(), http.MethodPost, "v1/environments/"+args[0]+"/keys/"+args[1]+"/revoke", map[string]any{}, &raw); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[1])
			return nil
		}),
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
