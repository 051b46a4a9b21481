package harness

import (
	"context"
	"encoding/json"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// logBatch bounds the entries read per store round trip.
const logBatch = 1000

// logCache holds a session's log while its runner lives, so that each step
// reads only the new entries.
type logCache struct {
	seq     int64
	rows    []ma.Event        // every entry read, in log order
	raw     []json.RawMessage // rows' JSON, as liveJSON marshalled them
	latest  map[string]int    // event id -> index of its latest row
	pending map[string]string // pending client events: id -> type
}

func newLogCache() *logCache {
	return &logCache{latest: make(map[string]int), pending: make(map[string]string)}
}

// refresh reads the entries written since the last refresh and returns
// them.
func (c *logCache) refresh(ctx context.Context, st Store, sessionID string) ([]ma.Event, error) {
	start := len(c.rows)
	for {
		entries, err := st.ReadLog(ctx, sessionID, c.seq, logBatch)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			c.add(e.Event)
			c.seq = e.Seq
		}
		if len(entries) < logBatch {
			return c.rows[start:], nil
		}
	}
}

func (c *logCache) add(ev ma.Event) {
	c.latest[ev.ID] = len(c.rows)
	c.rows = append(c.rows, ev)
	if store.IsPending(&ev) {
		c.pending[ev.ID] = ev.Type
	} else {
		delete(c.pending, ev.ID)
	}
}

// live returns the live events: each id once, at its latest echo (what
// Store.ListEvents returns).
func (c *logCache) live() []ma.Event {
	out := make([]ma.Event, 0, len(c.latest))
	for i, ev := range c.rows {
		if c.latest[ev.ID] == i {
			out = append(out, ev)
		}
	}
	return out
}

// liveJSON returns the live events, as live does, and each one's JSON;
// a row is marshalled once, the first time it is asked for.
func (c *logCache) liveJSON() ([]ma.Event, []json.RawMessage, error) {
	if n := len(c.rows) - len(c.raw); n > 0 {
		c.raw = append(c.raw, make([]json.RawMessage, n)...)
	}
	evs := make([]ma.Event, 0, len(c.latest))
	raws := make([]json.RawMessage, 0, len(c.latest))
	for i, ev := range c.rows {
		if c.latest[ev.ID] != i {
			continue
		}
		if c.raw[i] == nil {
			b, err := json.Marshal(ev)
			if err != nil {
				return nil, nil, err
			}
			c.raw[i] = b
		}
		evs, raws = append(evs, ev), append(raws, c.raw[i])
	}
	return evs, raws, nil
}

// queued reports whether an interrupt, and whether other input, waits.
func (c *logCache) queued() (interrupt, input bool) {
	for _, typ := range c.pending {
		if typ == ma.EventUserInterrupt {
			interrupt = true
		} else {
			input = true
		}
	}
	return interrupt, input
}
