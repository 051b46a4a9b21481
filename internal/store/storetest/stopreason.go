package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// StopReasonSessions are the sessions SeedStopReasons makes.
type StopReasonSessions struct {
	// Waiting is idle on requires_action for tool use toolu_1; Done is idle
	// after an ended turn; Running was idle and runs again; Fresh never ran.
	Waiting, Done, Running, Fresh string
}

// SeedStopReasons makes sessions in each state a stop reason can have,
// logging each status change as the harness does (the status event and
// the session's status and stop reason in one transaction).
func SeedStopReasons(t *testing.T, s store.Store) StopReasonSessions {
	t.Helper()
	out := StopReasonSessions{
		Waiting: newSession(t, s, "agent_a").ID, Done: newSession(t, s, "agent_a").ID,
		Running: newSession(t, s, "agent_a").ID, Fresh: newSession(t, s, "agent_a").ID,
	}
	idle := func(id string, r *ma.StopReason) { setStatus(t, s, id, ma.StatusIdle, r) }
	idle(out.Waiting, &ma.StopReason{Type: ma.StopEndTurn})
	idle(out.Waiting, &ma.StopReason{Type: ma.StopRequiresAction, EventIDs: []string{"toolu_1"}})
	idle(out.Done, &ma.StopReason{Type: ma.StopEndTurn})
	idle(out.Running, &ma.StopReason{Type: ma.StopRequiresAction, EventIDs: []string{"toolu_2"}})
	setStatus(t, s, out.Running, ma.StatusRunning, nil)
	return out
}

func setStatus(t *testing.T, s store.Store, id, status string, r *ma.StopReason) {
	t.Helper()
	ts := now()
	ev := &ma.Event{Type: ma.EventStatusRunning, ProcessedAt: &ts}
	if status == ma.StatusIdle {
		ev = &ma.Event{Type: ma.EventStatusIdle, StopReason: r, ProcessedAt: &ts}
	}
	if _, err := s.UpdateSession(context.Background(), id, func(tx store.Tx) error {
		tx.Session().Status, tx.Session().StopReason = status, r
		return tx.Append(ev)
	}); err != nil {
		t.Fatal(err)
	}
}

// CheckStopReasons: each session carries the stop reason of its last idle
// while idle and none otherwise, and the list's stop reason filter keeps
// the sessions stopped for one of the reasons asked.
func CheckStopReasons(t *testing.T, s store.Store, ss StopReasonSessions) {
	t.Helper()
	ctx := context.Background()
	want := map[string]*ma.StopReason{
		ss.Waiting: {Type: ma.StopRequiresAction, EventIDs: []string{"toolu_1"}},
		ss.Done:    {Type: ma.StopEndTurn},
		ss.Running: nil, ss.Fresh: nil,
	}
	for id, w := range want {
		got, err := s.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if (got.StopReason == nil) != (w == nil) || (w != nil && (got.StopReason.Type != w.Type || !slices.Equal(got.StopReason.EventIDs, w.EventIDs))) {
			t.Errorf("session %s (%s): stop reason %+v, want %+v", id, got.Status, got.StopReason, w)
		}
	}
	for _, c := range []struct {
		reasons []string
		want    []string
	}{
		{[]string{ma.StopRequiresAction}, []string{ss.Waiting}},
		{[]string{ma.StopEndTurn}, []string{ss.Done}},
		{[]string{ma.StopRequiresAction, ma.StopEndTurn}, []string{ss.Waiting, ss.Done}},
		{[]string{ma.StopRetriesExhausted}, nil},
	} {
		l, err := s.ListSessions(ctx, store.SessionQuery{StopReasons: c.reasons, ListQuery: store.ListQuery{Limit: 10}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range l {
			got = append(got, it.Value.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("stop reasons %v: sessions %v, want %v", c.reasons, got, c.want)
		}
	}
}

func testStopReasons(t *testing.T, s store.Store) {
	CheckStopReasons(t, s, SeedStopReasons(t, s))
}
