package harness

import (
	"slices"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// ToolInterruptedText is the result of a built-in tool that was running
// when the server stopped (a crash, a kill, or a shutdown that cut it
// off): the next runner cannot know what it did, so it tells the model
// rather than running it a second time.
const ToolInterruptedText = "The server stopped while this tool was running, before it reported a result. The tool may or may not have run; check its effects before running it again."

// answerInterrupted answers, in tx, the runnable tool uses that an earlier
// runner marked running and never finished, each with an error result
// saying so, and drops every older mark (those of turns that ended). A
// runner calls it once, in the transaction of its first mark: its own
// marks go with their results. It reports whether it answered any.
func (r *runner) answerInterrupted(tx store.Tx, uses []*toolUse) (bool, error) {
	marked, err := tx.ToolsRunning()
	if err != nil || len(marked) == 0 {
		return false, err
	}
	now := r.h.now()
	isErr := true
	answered := false
	for _, u := range uses {
		if !slices.Contains(marked, u.ev.ID) {
			continue
		}
		if err := tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: u.ev.ID, IsError: &isErr, ProcessedAt: &now,
			Content: []ma.ContentBlock{{Type: "text", Text: ToolInterruptedText}}}); err != nil {
			return false, err
		}
		answered = true
	}
	return answered, tx.UnmarkToolRunning("")
}
