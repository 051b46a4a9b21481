package cli

import (
	"fmt"

	ma "github.com/reinsdev/reins/managedagents"
)

// outcome renders the events of an outcome: its definition, the start
// of each evaluation and its verdict (the heartbeats show nothing).
func (r *renderer) outcome(ev ma.Event) string {
	iteration := int64(0)
	if ev.Iteration != nil {
		iteration = *ev.Iteration
	}
	switch ev.Type {
	case ma.EventUserDefineOutcome:
		if ev.Flushed {
			return r.line(styleYellow, "outcome not processed (the turn before it failed): "+oneLine(ev.Description, 200))
		}
		return r.line(styleBold, fmt.Sprintf("◎ outcome %s: %s", ev.OutcomeID, oneLine(ev.Description, 200)))
	case ma.EventSpanOutcomeEvaluationStart:
		return r.line(styleDim, fmt.Sprintf("… grading the work (iteration %d)", iteration))
	}
	explanation := ""
	if ev.Explanation != nil {
		explanation = oneLine(*ev.Explanation, 300)
	}
	style, mark := styleYellow, "↻"
	switch ev.Result {
	case ma.OutcomeSatisfied:
		style, mark = styleGreen, "✓"
	case ma.OutcomeFailed, ma.OutcomeInterrupted, ma.OutcomeMaxIterationsReached:
		style, mark = styleRed, "✗"
	}
	return r.line(style, fmt.Sprintf("%s outcome %s (iteration %d): %s", mark, ev.Result, iteration, explanation))
}
