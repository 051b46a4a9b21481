package harness

import (
	"errors"
	"slices"

	"github.com/reinsdev/reins/internal/awaiting"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// ToolInterruptedText is the result of a built-in tool that was running
// when the server stopped (a crash, a kill, or a shutdown that cut it
// off): the next runner cannot know what it did, so it tells the model
// rather than running it a second time.
const ToolInterruptedText = "The server stopped while this tool was running, before it reported a result. " + toolset.MayHaveRunText

// ToolCutOffText is the result of a built-in tool that was running when
// the turn ended (a user.interrupt, or a turn abandoned after internal
// failures): it was cancelled, possibly half done.
const ToolCutOffText = "The turn was interrupted while this tool was running, before it reported a result. " + toolset.MayHaveRunText

// toolUnansweredText is the transcript's result of a tool use that its
// runner (a pull worker, the client, an MCP server) may have received
// before the turn ended without its result.
const toolUnansweredText = "The turn ended before this tool reported a result. " + toolset.MayHaveRunText

// toolNotRunText is the transcript's result of a tool use that provably
// never started: the turn ended before it was dispatched.
const toolNotRunText = "The turn ended before this tool ran; it did not run."

// answerInterrupted answers, in tx, the runnable tool uses that an earlier
// runner marked running and never finished, each with an error result
// saying so, and drops every older mark (those of turns that ended). A
// runner calls it once, in the transaction of its first mark: its own
// marks go with their results. It reports whether it answered any.
func (r *runner) answerInterrupted(tx store.Tx, uses []awaiting.Use) (bool, error) {
	marked, err := tx.ToolsRunning()
	if err != nil || len(marked) == 0 {
		return false, err
	}
	now := r.h.now()
	isErr := true
	answered := false
	for _, u := range uses {
		if !slices.Contains(marked, u.Event.ID) {
			continue
		}
		if err := tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: u.Event.ID, IsError: &isErr, ProcessedAt: &now,
			Content: []ma.ContentBlock{{Type: "text", Text: ToolInterruptedText}}}); err != nil {
			return false, err
		}
		answered = true
	}
	return answered, tx.UnmarkToolRunning("")
}

// answerCutOff answers, in tx, the built-in tool uses that are marked
// running (dispatched, no result yet) with an error result saying text,
// and drops every mark. A turn that ends calls it: the marked tools were
// cancelled mid-way, so the log and the next turn say "may or may not have
// run" rather than "did not run".
func answerCutOff(tx store.Tx, text, now string) error {
	marked, err := tx.ToolsRunning()
	if err != nil || len(marked) == 0 {
		return err
	}
	isErr := true
	for _, id := range marked {
		ev, err := tx.Event(id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && ev.Type != ma.EventAgentToolUse) {
			continue
		}
		if err != nil {
			return err
		}
		if err := tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: id, IsError: &isErr, ProcessedAt: &now,
			Content: []ma.ContentBlock{{Type: "text", Text: text}}}); err != nil {
			return err
		}
	}
	return tx.UnmarkToolRunning("")
}
