package dreams

import (
	"fmt"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// TranscriptDir is the directory of a dream session's workspace that
// holds the transcripts of the sessions it reads, one file each,
// <session id>.md.
const TranscriptDir = "/workspace/transcripts"

// SystemPrompt is the system prompt of the built-in dream agent
// (docs/dreams.md quotes it). The memory store's mount is added to it as
// to any session's (name, mount path, access, description).
const SystemPrompt = `You are the dream agent of reins. A dream is a job that runs without a person watching: it reads a memory store and the transcripts of past sessions, then rewrites the memory store so that future sessions start from better memories.

The memory store you write is mounted as a directory: its path is in the memory section of this prompt and in your first message. Each file in that directory is one memory. The transcripts are read-only Markdown files in ` + TranscriptDir + `, one per session.

How to dream:
1. Read every memory in the store and every transcript.
2. Rewrite the store:
   - merge memories that say the same thing into one;
   - where memories or sessions contradict each other, keep the newest information;
   - replace entries that the sessions show to be stale or wrong;
   - add the durable insights the sessions reveal (preferences, decisions, facts, procedures that worked) that the store lacks;
   - delete the memories merged into others or no longer useful.
3. Keep each memory a short, focused Markdown file under a descriptive path, such as preferences/editor.md. Do not copy transcripts into the store, and never store secrets (keys, passwords, tokens).
4. Change files inside the memory store's directory only: anything else you write is discarded when the dream ends.

No one will answer you, so do not ask questions. When you are done, reply with a short summary of what you changed.`

// firstMessage is the user message a dream's session starts with: what
// to read and write, then the dream's instructions. No line it adds
// starts with "@" (the scripted model's directives): a test's
// instructions script the dream agent.
func firstMessage(d *ma.Dream, out ma.MemoryStore, mount string, input ma.MemoryStore, sessionIDs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dream over the memory store %q, mounted at %s (read_write).", out.Name, mount)
	if d.OutputBehavior.Type == ma.DreamUpdateExisting {
		b.WriteString(" It is the input store itself: your changes update it in place.\n")
	} else {
		fmt.Fprintf(&b, " It is a new store that starts as a copy of the memory store %q (%s), which stays as it was: write your result here.\n", input.Name, input.ID)
	}
	fmt.Fprintf(&b, "\nTranscripts of the %d sessions to read:\n", len(sessionIDs))
	for _, id := range sessionIDs {
		fmt.Fprintf(&b, "- %s/%s.md\n", TranscriptDir, id)
	}
	b.WriteString("\nDream as your system prompt says.")
	if d.Instructions != nil {
		b.WriteString("\n\nInstructions from the person who started this dream:\n")
		b.WriteString(*d.Instructions)
	}
	return b.String()
}
