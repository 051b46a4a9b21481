package agents

import (
	"slices"

	ma "github.com/reinsdev/reins/managedagents"
)

// efforts are the levels of model.effort.
var efforts = []string{"low", "medium", "high", "xhigh", "max"}

// CheckModel checks an agent's model (whether a provider serves it is
// [Rules.Model]'s to say).
func CheckModel(m ma.ModelConfig) error {
	if m.ID == "" {
		return invalid("model: required")
	}
	if len(m.ID) > 256 {
		return invalid("model: id longer than 256 characters")
	}
	if m.Effort != nil && !slices.Contains(efforts, m.Effort.Type) {
		return invalid("model.effort: must be one of low, medium, high, xhigh, max; got %q", m.Effort.Type)
	}
	if m.Speed != "" && m.Speed != "standard" && m.Speed != "fast" {
		return invalid("model.speed: must be standard or fast; got %q", m.Speed)
	}
	return nil
}
