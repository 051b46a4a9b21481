package harness

import (
	"fmt"
	"strings"

	"github.com/reinsdev/reins/internal/model"
	ma "github.com/reinsdev/reins/managedagents"
)

// Context budgets, as fractions of the model's context window.
const (
	compactAt   = 0.80 // compact when the request is estimated above this
	keepRecent  = 0.30 // the recent part kept verbatim
	summaryPart = 0.05 // the summary of the rest
)

// defaultContextWindow is the context window, in tokens, of models the
// harness knows nothing specific about.
const defaultContextWindow = 200_000

// contextWindow returns the context window of a model, in tokens.
func (h *Harness) contextWindow(modelID string) int {
	if h.cfg.ContextWindow != nil {
		if n := h.cfg.ContextWindow(modelID); n > 0 {
			return n
		}
	}
	if strings.HasPrefix(modelID, "openai/") {
		return 128_000
	}
	return defaultContextWindow
}

// estimateTokens is a cheap upper-leaning estimate: about four bytes per
// token, and a flat cost for images and documents.
func estimateTokens(system string, msgs []model.Message, tools []model.Tool) int {
	n := len(system)
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	for _, m := range msgs {
		n += blockBytes(m.Content)
	}
	return n/4 + 1
}

func blockBytes(blocks []model.Block) int {
	n := 0
	for _, b := range blocks {
		switch b.Type {
		case model.BlockImage, model.BlockDocument:
			n += 6400 // ~1,600 tokens
		default:
			n += len(b.Text) + len(b.Input) + len(b.Name) + len(b.Raw) + 16
		}
		n += blockBytes(b.Content)
	}
	return n
}

// eventBytes estimates what an event adds to the transcript.
func eventBytes(ev *ma.Event) int {
	n := len(ev.Input) + len(ev.Name) + len(ev.DenyMessage) + len(ev.ServerBlock)
	for _, c := range ev.Content {
		n += len(c.Text) + len(c.Source)
		for _, cc := range c.Content {
			n += len(cc.Text)
		}
	}
	return n
}

// compaction plans a compaction of events for a window of the given size:
// the id of the last event to fold into the summary and the summary. ok is
// false when no turn boundary leaves a recent part that fits.
func compaction(events []ma.Event, window int) (through, summary string, ok bool) {
	budget := int(float64(window)*keepRecent) * 4 // bytes
	// Walk back from the end; the cut must sit just before a user message
	// that starts a turn, so that no tool use is separated from its
	// result.
	size := 0
	cut := -1
	for i := len(events) - 1; i > 0; i-- {
		size += eventBytes(&events[i])
		if size > budget {
			break
		}
		if events[i].Type == ma.EventUserMessage && events[i].ProcessedAt != nil {
			cut = i
		}
	}
	// Only move forward: a cut at or before the previous one would not
	// shrink anything (and would compact again and again).
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == ma.EventAgentContextCompacted {
			for j := 0; j < i; j++ {
				if events[j].ID == events[i].CompactedThrough && cut-1 <= j {
					return "", "", false
				}
			}
			break
		}
	}
	if cut <= 0 {
		return "", "", false
	}
	// An earlier compaction's summary is carried into the new one.
	var lines []string
	limit := int(float64(window)*summaryPart) * 4
	used := 0
	add := func(who, text string) {
		text = strings.Join(strings.Fields(text), " ")
		if len(text) > 300 {
			text = text[:300] + "…"
		}
		if text == "" || used > limit {
			return
		}
		line := fmt.Sprintf("- %s: %s", who, text)
		used += len(line)
		lines = append(lines, line)
	}
	folded := 0
	for i := range cut {
		ev := &events[i]
		switch ev.Type {
		case ma.EventAgentContextCompacted:
			for _, c := range ev.Content {
				add("earlier summary", c.Text)
			}
		case ma.EventUserMessage, ma.EventSystemMessage:
			if ev.ProcessedAt != nil {
				folded++
				for _, c := range ev.Content {
					add("user", c.Text)
				}
			}
		case ma.EventAgentMessage:
			folded++
			for _, c := range ev.Content {
				add("assistant", c.Text)
			}
		case ma.EventAgentToolUse, ma.EventAgentCustomToolUse, ma.EventAgentMCPToolUse:
			folded++
			add("assistant called tool "+ev.Name, string(ev.Input))
		}
	}
	summary = fmt.Sprintf("[reins compacted %d earlier messages of this conversation to fit the model's context window. What they said, in order:]\n%s",
		folded, strings.Join(lines, "\n"))
	return events[cut-1].ID, summary, true
}
