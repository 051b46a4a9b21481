package harness

import (
	"context"
	"slices"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// ToolInterruptedText is the result of a built-in tool that was running
// when the server stopped (a crash, a kill, or a shutdown that cut it
// off): the next runner cannot know what it did, so it tells the model
// rather than running it a second time.
const ToolInterruptedText = "The server stopped while this tool was running, before it reported a result. The tool may or may not have run; check its effects before running it again."

// settleInterrupted answers the runnable tool uses that an earlier runner
// marked running and never finished, each with an error result saying so.
// It looks once per runner: marks of this runner's own calls are removed
// with their results. It reports whether it answered any.
func (r *runner) settleInterrupted(ctx context.Context, uses []*toolUse) (bool, error) {
	if r.settled {
		return false, nil
	}
	answered := false
	err := r.update(ctx, func(tx store.Tx) error {
		marked, err := tx.ToolsRunning()
		if err != nil || len(marked) == 0 {
			return err
		}
		now := r.h.now()
		isErr := true
		for _, u := range uses {
			if !slices.Contains(marked, u.ev.ID) {
				continue
			}
			if err := tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: u.ev.ID, IsError: &isErr, ProcessedAt: &now,
				Content: []ma.ContentBlock{{Type: "text", Text: ToolInterruptedText}}}); err != nil {
				return err
			}
			answered = true
		}
		// Marks of tool uses that are not runnable any more (their turn
		// ended) are stale.
		return tx.UnmarkToolRunning("")
	})
	if err != nil {
		return false, err
	}
	r.settled = true
	if answered {
		r.h.log.Warn("tools were running when the server stopped; told the model they may or may not have run", "session", r.id)
	}
	return answered, nil
}
