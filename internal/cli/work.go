package cli

import (
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"
)

// envWork is `reins environments work ENV`: the work queue of a
// self-hosted environment, its items and their states.
func envWork(cf *clientFlags) *cobra.Command {
	var limit int64
	cmd := &cobra.Command{
		Use:   "work ENVIRONMENT_ID",
		Short: "Show a self-hosted environment's work queue: stats and items",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			stats, err := c.Beta.Environments.Work.Stats(cmd.Context(), args[0], anthropic.BetaEnvironmentWorkStatsParams{})
			if err != nil {
				return err
			}
			page, err := c.Beta.Environments.Work.List(cmd.Context(), args[0], anthropic.BetaEnvironmentWorkListParams{Limit: anthropic.Int(limit)})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return json.NewEncoder(w).Encode(map[string]json.RawMessage{"stats": json.RawMessage(stats.RawJSON()), "items": json.RawMessage(page.RawJSON())})
			}
			oldest := stats.OldestQueuedAt
			if oldest == "" {
				oldest = "-"
			}
			fmt.Fprintf(w, "queued %d (claimed, not acknowledged: %d), oldest queued %s, workers polling %d\n\n",
				stats.Depth, stats.Pending, oldest, stats.WorkersPolling)
			t := newTable(w, "WORK", "SESSION", "STATE", "CREATED", "LAST HEARTBEAT", "STOPPED")
			for _, it := range page.Data {
				t.row(it.ID, it.Data.ID, string(it.State), it.CreatedAt, orDash(it.LatestHeartbeatAt), orDash(it.StoppedAt))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), page.NextPage)
			return nil
		}),
	}
	cmd.Flags().Int64Var(&limit, "limit", 20, "items to show (1 to 100)")
	return cmd
}
