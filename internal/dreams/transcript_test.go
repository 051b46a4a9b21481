package dreams

import (
	"strings"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

// TestTranscript: messages, tool calls and results (cut, in a fence the
// result cannot close) and errors are rendered in order, thinking and
// status events left out, and the transcript stops at its size bound
// with a note.
func TestTranscript(t *testing.T) {
	sess := &ma.Session{ID: "sesn_1", Title: "A\nnew title", CreatedAt: "2026-12-01T00:00:00Z", Agent: ma.SessionAgent{ID: "agent_1", Name: "helper"}}
	tr := newTranscript(sess)
	yes := true
	for _, ev := range []ma.Event{
		{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "fix the build"}}},
		{Type: ma.EventAgentThinking},
		{Type: ma.EventAgentToolUse, Name: "bash", Input: ma.Raw(`{"command":"make"}`)},
		{Type: ma.EventAgentToolResult, IsError: &yes, Content: []ma.ContentBlock{{Type: "text", Text: "```\n" + strings.Repeat("é", maxToolText)}}},
		{Type: ma.EventStatusIdle},
		{Type: ma.EventSessionError, Error: &ma.SessionError{Type: "model_overloaded_error", Message: "busy"}},
		{Type: ma.EventAgentMessage, SessionThreadID: "sthr_1", Content: []ma.ContentBlock{{Type: "text", Text: "done"}}},
	} {
		tr.add(&ev)
	}
	got := tr.String()
	for _, want := range []string{"# Session sesn_1\n\nTitle: A new title\nAgent: helper (agent_1)\n", "## User\n\nfix the build\n",
		"## Tool call: bash\n\n```\n{\"command\":\"make\"}\n```\n", "## Tool error\n\n````\n```\n", "more bytes left out]\n````\n",
		"## Error\n\nmodel_overloaded_error: busy\n", "## Agent (thread sthr_1)\n\ndone\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("transcript lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "thinking") || strings.Contains(got, "idle") {
		t.Fatalf("transcript shows thinking or status:\n%s", got)
	}
	big := strings.Repeat("x", 1000)
	for range maxTranscript / 1000 {
		tr.add(&ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: big}}})
	}
	if n := len(tr.String()); n > maxTranscript+200 || !tr.full || !strings.HasSuffix(tr.String(), "its size limit.]\n") {
		t.Fatalf("a long session: %d bytes, full %v, ends %q", n, tr.full, tr.String()[n-60:])
	}
}
