package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// TestTranscriptDelta: over turns whose logs hold a user.message queued
// then echoed processed (it moves in the live log), spans, a tool use and
// result, a custom tool answer, an interrupt and a session.error, the
// agent end's copy (the transcript and inputs of the previous turn.start)
// cut after transcript_since and followed by the delta is byte for byte
// the whole transcript; each delta after the first turn is shorter than
// the whole transcript; a changed event before the cut moves the cut
// before it.
func TestTranscriptDelta(t *testing.T) {
	log := newLogCache()
	sess := &ma.Session{ID: "sesn_1"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	add := func(typ string, processed bool, id string) string {
		n++
		if id == "" {
			id = fmt.Sprintf("sevt_%03d", n)
		}
		ev := ma.Event{ID: id, Type: typ, Content: []ma.ContentBlock{{Type: "text", Text: fmt.Sprintf("event %d", n)}}}
		if processed {
			at := now.Add(time.Duration(n) * time.Second).Format(time.RFC3339Nano)
			ev.ProcessedAt = &at
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		log.add(&ev, raw)
		return id
	}
	// message queues a user.message and echoes it processed, as the
	// write path does when the turn takes it.
	message := func() {
		id := add(ma.EventUserMessage, false, "")
		add(ma.EventStatusRunning, true, "")
		add(ma.EventUserMessage, true, id)
	}
	var held []json.RawMessage // the agent end's copy
	var sent *sentTranscript
	turn := func(i int) {
		t.Helper()
		start, err := turnStart(sess, log.liveEntries())
		if err != nil {
			t.Fatal(err)
		}
		start.TurnID = fmt.Sprintf("turn_%d", i)
		d := sent.delta(&start)
		switch {
		case i == 0 && d != nil:
			t.Fatal("a delta without a previous turn")
		case i > 0 && (d == nil || d.Base != fmt.Sprintf("turn_%d", i-1) || d.Holder != "exec_1" || len(d.Events) >= len(start.Transcript)):
			t.Fatalf("turn %d: delta %+v of a transcript of %d events", i, d, len(start.Transcript))
		}
		got := start.Transcript
		if d != nil {
			cut := slices.IndexFunc(held, func(raw json.RawMessage) bool {
				var ev ma.Event
				return json.Unmarshal(raw, &ev) == nil && ev.ID == d.Since
			})
			if cut < 0 {
				t.Fatalf("turn %d: transcript_since %s is not in the copy", i, d.Since)
			}
			got = slices.Concat(held[:cut+1], d.Events)
		}
		if !slices.EqualFunc(got, start.Transcript, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("turn %d: rebuilt\n%s\nwant\n%s", i, got, start.Transcript)
		}
		held = slices.Concat(start.Transcript, start.Inputs)
		sent = newSentTranscript("exec_1", &start)
	}

	message()
	turn(0)
	add(ma.EventAgentMessage, true, "")
	add(ma.EventStatusIdle, true, "")

	message()
	turn(1)
	add(ma.EventSpanModelRequestStart, true, "")
	add(ma.EventAgentToolUse, true, "")
	add(ma.EventAgentToolResult, true, "")
	add(ma.EventAgentCustomToolUse, true, "")
	add(ma.EventSpanModelRequestEnd, true, "")
	add(ma.EventStatusIdle, true, "")

	add(ma.EventUserCustomToolResult, true, "")
	add(ma.EventStatusRunning, true, "")
	turn(2)
	add(ma.EventAgentMessage, true, "")
	add(ma.EventUserInterrupt, true, "")
	add(ma.EventStatusIdle, true, "")

	message()
	turn(3)
	add(ma.EventSessionError, true, "")
	add(ma.EventStatusRescheduled, true, "")
	add(ma.EventStatusRunning, true, "")
	turn(4) // the same turn, started again
	add(ma.EventAgentMessage, true, "")
	add(ma.EventStatusIdle, true, "")

	// An event the copy holds is echoed again, changed: the cut moves
	// before it.
	add(ma.EventAgentMessage, true, "sevt_004")
	message()
	turn(5)
}
