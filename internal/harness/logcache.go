package harness

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// logBatch bounds the entries read per store round trip.
const logBatch = 1000

// logCache holds a session's log while its runner lives, so that each step
// reads only the new entries. It keeps each entry once, as the JSON the
// store holds, and decodes the entries again only when the whole log is
// projected anew (live): a decoded event takes several times the memory
// of its JSON (BenchmarkLogCache).
type logCache struct {
	seq     int64
	entries []logEntry             // every entry read, in log order
	latest  map[string]int         // event id -> index of its latest entry
	pending map[string]queuedEvent // pending client events by id

	// read holds the events the last refresh read (entries[readAt:]),
	// decoded, until live uses them or the next refresh: a runner's first
	// step reads the whole log and projects it, and decodes it once.
	read   []ma.Event
	readAt int
}

// logEntry is an entry of the log: the event's JSON as stored, with the
// two fields the cache reads without decoding it.
type queuedEvent struct {
	typ    string
	thread string // the event's session_thread_id
}

type logEntry struct {
	ID, Type string
	Raw      json.RawMessage
}

func newLogCache() *logCache {
	return &logCache{latest: make(map[string]int), pending: make(map[string]queuedEvent)}
}

// refresh reads the entries written since the last refresh and returns
// them, decoded.
func (c *logCache) refresh(ctx context.Context, st Store, sessionID string) ([]ma.Event, error) {
	var fresh []ma.Event
	c.read, c.readAt = nil, len(c.entries)
	for {
		entries, err := st.ReadLog(ctx, sessionID, c.seq, logBatch)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			c.add(&e.Event, e.Raw)
			fresh = append(fresh, e.Event)
			c.seq = e.Seq
		}
		if len(entries) < logBatch {
			c.read = fresh
			return fresh, nil
		}
	}
}

// add appends ev, whose JSON is raw, to the log.
func (c *logCache) add(ev *ma.Event, raw json.RawMessage) {
	c.latest[ev.ID] = len(c.entries)
	c.entries = append(c.entries, logEntry{ID: ev.ID, Type: ev.Type, Raw: raw})
	if store.IsPending(ev) {
		c.pending[ev.ID] = queuedEvent{typ: ev.Type, thread: ev.SessionThreadID}
	} else {
		delete(c.pending, ev.ID)
	}
}

// liveEntries returns the live entries: each id once, at its latest echo
// (what Store.ListEvents returns).
func (c *logCache) liveEntries() []logEntry {
	out := make([]logEntry, 0, len(c.latest))
	for i, e := range c.entries {
		if c.latest[e.ID] == i {
			out = append(out, e)
		}
	}
	return out
}

// live returns the live events, as liveEntries does, decoded: those the
// last refresh read as it decoded them, the others from their JSON. The
// store decoded each entry's JSON once already (refresh keeps no other),
// so decoding it again cannot fail.
func (c *logCache) live() []ma.Event {
	read, readAt := c.read, c.readAt
	c.read = nil
	out := make([]ma.Event, 0, len(c.latest))
	for i, e := range c.entries {
		if c.latest[e.ID] != i {
			continue
		}
		if i >= readAt && i-readAt < len(read) {
			out = append(out, read[i-readAt])
			continue
		}
		var ev ma.Event
		if err := json.Unmarshal(e.Raw, &ev); err != nil {
			panic(fmt.Sprintf("event %s of the log cache does not decode: %v", e.ID, err))
		}
		out = append(out, ev)
	}
	return out
}

// queued reports whether an interrupt, and whether other input, waits.
func (c *logCache) queued() (interrupt, input bool) {
	return c.queuedFor(func(string) bool { return true })
}

// queuedFor is queued of the events whose session_thread_id ofThread
// accepts.
func (c *logCache) queuedFor(ofThread func(thread string) bool) (interrupt, input bool) {
	for _, q := range c.pending {
		if !ofThread(q.thread) {
			continue
		}
		if q.typ == ma.EventUserInterrupt {
			interrupt = true
		} else {
			input = true
		}
	}
	return interrupt, input
}
