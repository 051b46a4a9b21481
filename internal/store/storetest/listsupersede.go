package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// testListWhileConsumed lists a session's events with a byte budget (as
// the events endpoint does) while a runner consumes its queued messages
// one transaction at a time, each consumption superseding a message's
// echo with a later one: every list holds every message exactly once,
// whichever echo of it was live when the list was read. A list that read
// the entries' heads before a consumption and their bodies after it lost
// the message: its old echo was no longer live and its new one lay past
// the page.
func testListWhileConsumed(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	const n = 150
	want := map[string]bool{}
	for i := range n {
		ev := &ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: fmt.Sprint("message ", i)}}}
		if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.Append(ev) }); err != nil {
			t.Fatal(err)
		}
		want[ev.ID] = true
	}
	done := make(chan error, 1)
	go func() { done <- consumeOneByOne(ctx, s, sess.ID) }()
	for lists := 0; ; lists++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if lists < 10 {
				t.Logf("only %d lists ran while the messages were consumed", lists)
			}
			return
		default:
		}
		got, err := s.ListEvents(ctx, sess.ID, store.EventQuery{Limit: 1000, Raw: true, MaxBytes: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, e := range got {
			if e.Head() {
				t.Fatalf("list %d: a head (seq %d) within an 8 MiB budget", lists, e.Seq)
			}
			seen[e.Event.ID]++
		}
		for id := range want {
			if seen[id] != 1 {
				t.Fatalf("list %d (%d entries): message %s listed %d times, want once", lists, len(got), id, seen[id])
			}
		}
	}
}

// consumeOneByOne consumes the session's queued messages as a runner
// does, one per transaction: each is echoed again with processed_at.
func consumeOneByOne(ctx context.Context, s store.Store, sessionID string) error {
	for {
		left := 0
		_, err := s.UpdateSession(ctx, sessionID, func(tx store.Tx) error {
			p, err := tx.Pending()
			if err != nil || len(p) == 0 {
				return err
			}
			left = len(p) - 1
			ts := now()
			p[0].ProcessedAt = &ts
			return tx.Append(&p[0])
		})
		if err != nil || left == 0 {
			return err
		}
	}
}
