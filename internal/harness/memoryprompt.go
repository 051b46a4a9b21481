package harness

import (
	"fmt"
	"strings"

	"github.com/reinsdev/reins/internal/sessions"
	ma "github.com/reinsdev/reins/managedagents"
)

// memoryPrompt is the system prompt's section on the session's memory
// stores: each mount with its name, access, description and instructions
// (the store's name and description as the session was created with
// them). "" when the session has none.
func memoryPrompt(sess *ma.Session) string {
	res, err := sessions.Resources(sess)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, r := range res {
		if r.Type != "memory_store" {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("<memory_stores>\nMemory stores are directories that persist across sessions: other sessions may have written to them, and what you write there stays for later sessions. " +
				"Use your ordinary file tools on them. Check the relevant store before you start a task, and record what you learn that will help next time " +
				"(preferences, conventions, mistakes to avoid) in a read_write store. A read_only store cannot be written.\n")
		}
		fmt.Fprintf(&b, "<memory_store>\n<name>%s</name>\n<mount_path>%s</mount_path>\n<access>%s</access>\n", r.Name, r.MountPath, r.Access)
		if r.Description != "" {
			fmt.Fprintf(&b, "<description>%s</description>\n", r.Description)
		}
		if r.Instructions != nil && *r.Instructions != "" {
			fmt.Fprintf(&b, "<instructions>%s</instructions>\n", *r.Instructions)
		}
		b.WriteString("</memory_store>\n")
	}
	if b.Len() == 0 {
		return ""
	}
	b.WriteString("</memory_stores>")
	return b.String()
}
