package harness

import (
	"context"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// logBatch bounds the entries read per store round trip.
const logBatch = 1000

// logCache holds a session's live events while its runner lives, so that
// each step reads only the new log entries. It has the semantics of
// Store.ListEvents: each event id once, at the position of its latest echo.
type logCache struct {
	seq    int64
	events []ma.Event
	pos    map[string]int // event id -> index in events
}

func newLogCache() *logCache { return &logCache{pos: make(map[string]int)} }

// refresh appends the entries written since the last refresh.
func (c *logCache) refresh(ctx context.Context, st store.Store, sessionID string) error {
	for {
		entries, err := st.ReadLog(ctx, sessionID, c.seq, logBatch)
		if err != nil {
			return err
		}
		for _, e := range entries {
			c.add(e.Event)
			c.seq = e.Seq
		}
		if len(entries) < logBatch {
			return nil
		}
	}
}

func (c *logCache) add(ev ma.Event) {
	if i, ok := c.pos[ev.ID]; ok {
		// A new echo: the old entry stops being live.
		c.events = append(c.events[:i], c.events[i+1:]...)
		for j := i; j < len(c.events); j++ {
			c.pos[c.events[j].ID] = j
		}
	}
	c.pos[ev.ID] = len(c.events)
	c.events = append(c.events, ev)
}
