package executor

import (
	"container/list"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// DefaultTranscriptCache is how many sessions' transcripts an agent end
// keeps by default ([Options.TranscriptCache]).
const DefaultTranscriptCache = 1000

// features lists the optional protocol features the client declares at
// registration.
func (c *Client) features() []string {
	if c.opts.Agent != nil && c.opts.TranscriptCache > 0 {
		return []string{FeatureTranscriptDeltas}
	}
	return nil
}

// transcripts keeps, per session, the transcript and inputs of the last
// turn.start the agent end accepted, for at most max sessions (the least
// recently used leaves first).
type transcripts struct {
	mu    sync.Mutex // guards the fields below
	max   int
	order *list.List               // of *heldTranscript, most recent first
	bySes map[string]*list.Element // by session id
}

// heldTranscript is a session's transcript followed by the inputs, as
// one turn.start (turnID's) gave them, with each event's id.
type heldTranscript struct {
	sessionID, turnID string
	events            []json.RawMessage
	ids               []string
}

// rebuild makes p.Transcript whole again when it is a delta, and keeps
// what p gives for the session's next turn.start. It reports false when p
// is a delta over a transcript it does not hold.
func (ts *transcripts) rebuild(p *TurnStart) (bool, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var ids []string
	if p.TranscriptSince != "" {
		el := ts.bySes[p.SessionID]
		if el == nil {
			return false, nil
		}
		held := el.Value.(*heldTranscript)
		i := slices.Index(held.ids, p.TranscriptSince)
		if held.turnID != p.TranscriptBase || i < 0 {
			return false, nil
		}
		p.Transcript = append(slices.Clip(held.events[:i+1]), p.Transcript...)
		ids = slices.Clip(held.ids[:i+1])
		p.TranscriptSince, p.TranscriptBase = "", ""
	}
	if ts.max <= 0 {
		return true, nil
	}
	events := slices.Concat(p.Transcript, p.Inputs)
	for _, raw := range events[len(ids):] {
		var ev struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			return false, fmt.Errorf("executor: decode a transcript event: %w", err)
		}
		ids = append(ids, ev.ID)
	}
	ts.keepLocked(&heldTranscript{sessionID: p.SessionID, turnID: p.TurnID, events: events, ids: ids})
	return true, nil
}

func (ts *transcripts) keepLocked(h *heldTranscript) {
	if ts.order == nil {
		ts.order, ts.bySes = list.New(), make(map[string]*list.Element)
	}
	if el := ts.bySes[h.sessionID]; el != nil {
		el.Value = h
		ts.order.MoveToFront(el)
		return
	}
	ts.bySes[h.sessionID] = ts.order.PushFront(h)
	for ts.order.Len() > ts.max {
		old := ts.order.Remove(ts.order.Back()).(*heldTranscript)
		delete(ts.bySes, old.sessionID)
	}
}
