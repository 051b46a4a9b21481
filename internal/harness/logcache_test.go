package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// turnLog returns the JSON of a log of turns as a model and tools write
// it: a user message, then per model call a span pair, a thinking block,
// a tool use and its result (a few KB), and a closing agent message.
func turnLog(turns, calls int) []json.RawMessage {
	var out []json.RawMessage
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	emit := func(ev ma.Event) {
		n++
		ev.ID = fmt.Sprintf("sevt_%08d", n)
		at := ma.Time(now.Add(time.Duration(n) * time.Millisecond))
		ev.ProcessedAt = &at
		b, err := json.Marshal(ev)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	text := func(s string, size int) []ma.ContentBlock {
		return []ma.ContentBlock{{Type: "text", Text: strings.Repeat(s, size/len(s))}}
	}
	speed := "standard"
	for range turns {
		emit(ma.Event{Type: ma.EventUserMessage, Content: text("please look at the code. ", 200)})
		emit(ma.Event{Type: ma.EventStatusRunning})
		for c := range calls {
			emit(ma.Event{Type: ma.EventSpanModelRequestStart})
			emit(ma.Event{Type: ma.EventAgentThinking, Content: text("thinking about it ", 300)})
			use := ma.Event{Type: ma.EventAgentToolUse, Name: "bash", Input: ma.Raw(fmt.Sprintf(`{"command":"grep -rn pattern%d ./internal"}`, c))}
			emit(use)
			emit(ma.Event{Type: ma.EventAgentToolResult, ToolUseID: fmt.Sprintf("sevt_%08d", n), Content: text("internal/x.go:12: a line of output\n", 3000)})
			emit(ma.Event{Type: ma.EventSpanModelRequestEnd, ModelUsage: &ma.ModelUsage{InputTokens: 12000, OutputTokens: 300, Speed: &speed}})
		}
		emit(ma.Event{Type: ma.EventAgentMessage, Content: text("here is what I found. ", 800)})
		emit(ma.Event{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopEndTurn}})
	}
	return out
}

// entries returns the log as a read of the store returns it: each entry's
// JSON in a buffer of its own, and decoded.
func entries(raws []json.RawMessage) []store.Entry {
	out := make([]store.Entry, len(raws))
	for i, raw := range raws {
		out[i] = store.Entry{Seq: int64(i + 1), Raw: append([]byte(nil), raw...), Size: int64(len(raw))}
		if err := json.Unmarshal(out[i].Raw, &out[i].Event); err != nil {
			panic(err)
		}
	}
	return out
}

// logStore is a Store whose log is es.
type logStore struct {
	Store
	es []store.Entry
}

func (s *logStore) ReadLog(_ context.Context, _ string, after int64, limit int) ([]store.Entry, error) {
	es := s.es[min(int(after), len(s.es)):]
	return es[:min(limit, len(es))], nil
}

func fill(c *logCache, es []store.Entry) {
	for i := range es {
		c.add(&es[i].Event, es[i].Raw)
	}
}

// TestLogCacheLive: the live events are each id's latest entry, decoded
// from the JSON the cache keeps, which is the store's.
func TestLogCacheLive(t *testing.T) {
	raws := turnLog(2, 2)
	es := entries(raws)
	echo := es[0] // the first user.message, echoed processed
	echo.Event.Flushed = true
	echo.Raw, _ = json.Marshal(echo.Event)
	es = append(es, echo)
	c := newLogCache()
	fill(c, es)
	live := c.live()
	entries := c.liveEntries()
	if len(live) != len(raws) || len(entries) != len(raws) {
		t.Fatalf("%d live events, %d live entries, want %d", len(live), len(entries), len(raws))
	}
	last := len(live) - 1
	if live[last].ID != echo.Event.ID || !live[last].Flushed || string(entries[last].Raw) != string(echo.Raw) {
		t.Fatalf("the echoed event: %+v, %s", live[last], entries[last].Raw)
	}
	for i := range last {
		if string(entries[i].Raw) != string(raws[i+1]) || live[i].ID != entries[i].ID || live[i].Type != entries[i].Type {
			t.Fatalf("live event %d: %+v, %s", i, live[i], entries[i].Raw)
		}
	}
}

// TestLogCacheRefresh: the live events after each refresh are those of
// the log, whether they come from the refresh's read or from the JSON the
// cache keeps.
func TestLogCacheRefresh(t *testing.T) {
	raws := turnLog(3, 2)
	st := &logStore{es: entries(raws[:len(raws)/2])}
	c := newLogCache()
	check := func(want []json.RawMessage) {
		t.Helper()
		for range 2 { // from the read, then from the JSON
			var wantEvs []ma.Event
			for _, e := range entries(want) {
				wantEvs = append(wantEvs, e.Event)
			}
			if got := c.live(); !reflect.DeepEqual(got, wantEvs) {
				t.Fatalf("live: %d events, want %d", len(got), len(wantEvs))
			}
		}
	}
	fresh, err := c.refresh(context.Background(), st, "sesn_1")
	if err != nil || len(fresh) != len(raws)/2 {
		t.Fatalf("first refresh: %d events, %v", len(fresh), err)
	}
	check(raws[:len(raws)/2])
	// More entries, one of them an echo of the first.
	echo := entries(raws[:1])[0]
	echo.Event.Flushed = true
	echo.Raw, _ = json.Marshal(echo.Event)
	more := append(entries(raws[len(raws)/2:]), echo)
	for i := range more {
		more[i].Seq = int64(len(st.es) + i + 1)
	}
	st.es = append(st.es, more...)
	if fresh, err = c.refresh(context.Background(), st, "sesn_1"); err != nil || len(fresh) != len(more) {
		t.Fatalf("second refresh: %d events, %v", len(fresh), err)
	}
	check(append(raws[1:], echo.Raw))
}

// BenchmarkLogCache measures a runner's log cache over a session of 50
// turns of 5 tool calls each (1,450 events, 1.1 MB of JSON): the heap it
// holds (B/event), a runner's first step (reading the whole log and
// projecting it), projecting the whole log anew later (live), and the
// events of an agent end's turn.start (turnStart).
func BenchmarkLogCache(b *testing.B) {
	raws := turnLog(50, 5)
	size := 0
	for _, r := range raws {
		size += len(r)
	}
	b.Run("retained", func(b *testing.B) {
		var held float64
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			es := entries(raws) // what the store's reads allocate
			c := newLogCache()
			fill(c, es)
			es = nil
			runtime.GC()
			runtime.ReadMemStats(&after)
			held = float64(after.HeapAlloc) - float64(before.HeapAlloc)
			runtime.KeepAlive(c)
		}
		b.ReportMetric(held/float64(len(raws)), "B/event")
		b.ReportMetric(float64(size)/float64(len(raws)), "JSON-B/event")
	})
	b.Run("firstStep", func(b *testing.B) {
		st := &logStore{es: entries(raws)}
		for b.Loop() {
			c := newLogCache()
			if _, err := c.refresh(context.Background(), st, "sesn_1"); err != nil {
				b.Fatal(err)
			}
			_ = c.live()
		}
	})
	c := newLogCache()
	fill(c, entries(raws))
	b.Run("live", func(b *testing.B) {
		for b.Loop() {
			_ = c.live()
		}
	})
	sess := &ma.Session{ID: "sesn_1"}
	b.Run("turnStart", func(b *testing.B) {
		for b.Loop() {
			if _, err := turnStart(sess, c.liveEntries()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
