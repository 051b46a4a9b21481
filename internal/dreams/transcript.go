package dreams

import (
	"fmt"
	"strings"
	"unicode/utf8"

	ma "github.com/reinsdev/reins/managedagents"
)

// Bounds of a transcript: what a dream agent reads of one session.
const (
	// maxTranscript bounds a transcript (bytes); the rest of the session
	// is left out, with a note.
	maxTranscript = 1 << 20
	// maxToolText bounds the text shown of one tool call's input or
	// result (bytes).
	maxToolText = 4000
)

// transcript renders a session's log as Markdown for a dream agent to
// read: its messages, tool calls and results (cut at maxToolText) and
// errors, in log order, at most maxTranscript bytes. Thinking, spans and
// status changes are left out.
type transcript struct {
	b    strings.Builder
	full bool // maxTranscript reached
}

// newTranscript starts the transcript of sess.
func newTranscript(sess *ma.Session) *transcript {
	t := &transcript{}
	fmt.Fprintf(&t.b, "# Session %s\n\n", sess.ID)
	if sess.Title != "" {
		fmt.Fprintf(&t.b, "Title: %s\n", oneLine(sess.Title))
	}
	fmt.Fprintf(&t.b, "Agent: %s (%s)\nCreated: %s\n", oneLine(sess.Agent.Name), sess.Agent.ID, sess.CreatedAt)
	return t
}

// add renders one event of the log.
func (t *transcript) add(ev *ma.Event) {
	if t.full {
		return
	}
	var part string
	switch ev.Type {
	case ma.EventUserMessage:
		part = section("User", ev, texts(ev.Content))
	case ma.EventSystemMessage:
		part = section("System message", ev, texts(ev.Content))
	case ma.EventAgentMessage:
		part = section("Agent", ev, texts(ev.Content))
	case ma.EventAgentToolUse, ma.EventAgentMCPToolUse, ma.EventAgentCustomToolUse:
		part = section("Tool call: "+ev.Name, ev, fence(cut(string(ev.Input))))
	case ma.EventAgentToolResult, ma.EventAgentMCPToolResult, ma.EventUserToolResult, ma.EventUserCustomToolResult:
		title := "Tool result"
		if ev.IsError != nil && *ev.IsError {
			title = "Tool error"
		}
		part = section(title, ev, fence(cut(texts(ev.Content)+ev.Result)))
	case ma.EventSessionError:
		if ev.Error != nil {
			part = section("Error", ev, ev.Error.Type+": "+ev.Error.Message)
		}
	}
	if part == "" {
		return
	}
	if t.b.Len()+len(part) > maxTranscript {
		t.b.WriteString("\n[The rest of this session is left out: the transcript reached its size limit.]\n")
		t.full = true
		return
	}
	t.b.WriteString(part)
}

// String returns the transcript.
func (t *transcript) String() string { return t.b.String() }

// section is a heading (with the thread of a child thread's event) and
// its body.
func section(title string, ev *ma.Event, body string) string {
	if ev.SessionThreadID != "" {
		title += " (thread " + ev.SessionThreadID + ")"
	}
	return "\n## " + title + "\n\n" + strings.TrimRight(body, "\n") + "\n"
}

// texts joins the text of content blocks, nested ones included.
func texts(blocks []ma.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Text != "":
			parts = append(parts, b.Text)
		case len(b.Content) > 0:
			parts = append(parts, texts(b.Content))
		case b.Type != "text":
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n\n")
}

// cut shortens s to maxToolText bytes (on a rune boundary), saying so.
func cut(s string) string {
	if len(s) <= maxToolText {
		return s
	}
	n := maxToolText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("\n[%d more bytes left out]", len(s)-n)
}

// fence puts s in a code block whose fence s does not contain.
func fence(s string) string {
	f := "```"
	for strings.Contains(s, f) {
		f += "`"
	}
	return f + "\n" + strings.TrimRight(s, "\n") + "\n" + f
}

// oneLine is s on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
