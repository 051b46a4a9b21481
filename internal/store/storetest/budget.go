package storetest

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// testByteBudget reads a log of events of different sizes with byte
// budgets: ReadLogRaw and ListEvents (forwards, descending, backwards,
// filtered, decoded or raw) return the entries that fit and then a head of
// the first that does not, and never read the JSON of an entry past the
// budget.
func testByteBudget(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	// Text lengths of events 1 to 5; event 3 is large.
	lengths := []int{100, 1000, 4 << 20, 100, 100}
	for _, n := range lengths {
		ts := now()
		ev := &ma.Event{Type: ma.EventAgentMessage, ProcessedAt: &ts, Content: []ma.ContentBlock{{Type: "text", Text: strings.Repeat("x", n)}}}
		if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.Append(ev) }); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ReadLogRaw(ctx, sess.ID, 0, 100, 0)
	if err != nil || len(all) != len(lengths) {
		t.Fatalf("ReadLogRaw = %d entries, %v", len(all), err)
	}
	size := make(map[int64]int64) // seq -> size
	for _, e := range all {
		if e.Size != int64(len(e.Raw)) || e.Head() {
			t.Fatalf("entry %d: size %d, %d bytes of JSON", e.Seq, e.Size, len(e.Raw))
		}
		size[e.Seq] = e.Size
	}

	// check compares a read with the seqs it must return with their JSON,
	// then the seq of its head (0: none).
	check := func(what string, got []store.Entry, bodies []int64, head int64) {
		t.Helper()
		var want []string
		for _, seq := range bodies {
			want = append(want, "body "+strconv.FormatInt(seq, 10))
		}
		if head != 0 {
			want = append(want, "head "+strconv.FormatInt(head, 10))
		}
		var have []string
		for _, e := range got {
			if e.Head() {
				have = append(have, "head "+strconv.FormatInt(e.Seq, 10))
				if e.Size != size[e.Seq] || e.Event.Type != ma.EventAgentMessage || e.Event.ID == "" || len(e.Event.Content) != 0 {
					t.Errorf("%s: head %d = %+v, want its size %d, type and id only", what, e.Seq, e, size[e.Seq])
				}
				continue
			}
			have = append(have, "body "+strconv.FormatInt(e.Seq, 10))
			if e.Size != size[e.Seq] || int64(len(e.Raw)) != e.Size {
				t.Errorf("%s: entry %d has size %d and %d bytes, want %d", what, e.Seq, e.Size, len(e.Raw), size[e.Seq])
			}
		}
		if strings.Join(have, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s = [%s], want [%s]", what, strings.Join(have, ", "), strings.Join(want, ", "))
		}
	}
	two := size[1] + size[2]
	log, err := s.ReadLogRaw(ctx, sess.ID, 0, 100, two)
	check("ReadLogRaw within entries 1 and 2", log, []int64{1, 2}, 3)
	log, _ = s.ReadLogRaw(ctx, sess.ID, 0, 100, two-1)
	check("ReadLogRaw a byte short of entries 1 and 2", log, []int64{1}, 2)
	log, _ = s.ReadLogRaw(ctx, sess.ID, 2, 100, two)
	check("ReadLogRaw of an entry over the budget", log, nil, 3)
	log, _ = s.ReadLogRaw(ctx, sess.ID, 2, 100, size[3])
	check("ReadLogRaw with the large entry's size", log, []int64{3}, 4)
	log, _ = s.ReadLogRaw(ctx, sess.ID, 0, 2, two)
	check("ReadLogRaw limited to 2", log, []int64{1, 2}, 0)
	log, _ = s.ReadLogRaw(ctx, sess.ID, 3, 100, 1<<30)
	check("ReadLogRaw within a large budget", log, []int64{4, 5}, 0)
	if err != nil {
		t.Fatal(err)
	}

	list := func(q store.EventQuery) []store.Entry {
		t.Helper()
		q.Raw = true
		if q.Limit == 0 {
			q.Limit = 100
		}
		l, err := s.ListEvents(ctx, sess.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	check("ListEvents within entries 1 and 2", list(store.EventQuery{MaxBytes: two}), []int64{1, 2}, 3)
	check("ListEvents after 2", list(store.EventQuery{After: 2, MaxBytes: two}), nil, 3)
	check("ListEvents after 2, the large entry's size", list(store.EventQuery{After: 2, MaxBytes: size[3]}), []int64{3}, 4)
	check("ListEvents descending", list(store.EventQuery{Desc: true, MaxBytes: size[5] + size[4]}), []int64{5, 4}, 3)
	// A page read backwards ends at its first entry.
	if l := list(store.EventQuery{Before: 5, MaxBytes: size[4] + 1}); len(l) != 2 || !l[0].Head() || l[0].Seq != 3 || l[1].Seq != 4 || l[1].Head() {
		t.Errorf("ListEvents before 5 = %+v, want the head of 3 then entry 4", l)
	}
	check("ListEvents of agent.message within budget", list(store.EventQuery{Types: []string{ma.EventAgentMessage}, After: 3, MaxBytes: 1 << 30}), []int64{4, 5}, 0)
	check("ListEvents of no type", list(store.EventQuery{Types: []string{ma.EventUserMessage}, MaxBytes: 1}), nil, 0)
	check("ListEvents limited to 1", list(store.EventQuery{Limit: 1, MaxBytes: 1 << 30}), []int64{1}, 0)
	dec, err := s.ListEvents(ctx, sess.ID, store.EventQuery{Limit: 100, MaxBytes: two})
	if err != nil || len(dec) != 3 || len(dec[1].Event.Content) != 1 || len(dec[1].Event.Content[0].Text) != lengths[1] || !dec[2].Head() {
		t.Fatalf("decoded ListEvents = %+v, %v", dec, err)
	}

	// The large entry's JSON is not read when it is past the budget.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	list(store.EventQuery{After: 2, MaxBytes: 1 << 10})
	s.ReadLogRaw(ctx, sess.ID, 2, 100, 1<<10)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("reading the head of a %d-byte entry allocated %d bytes", size[3], n)
	}
}
