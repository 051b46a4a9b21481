package harness

import (
	"context"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// SkillPrompter describes a session's skills for its system prompt: each
// skill's name, description and where its SKILL.md is, so that the model
// reads a skill's body only when a task calls for it.
type SkillPrompter interface {
	SkillsPrompt(ctx context.Context, sess *ma.Session) (string, error)
}

// joinPrompt appends a section to a system prompt.
func joinPrompt(system, section string) string {
	switch {
	case section == "":
		return system
	case strings.TrimSpace(system) == "":
		return section
	}
	return strings.TrimRight(system, "\n") + "\n\n" + section
}
