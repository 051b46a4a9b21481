package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/reinsdev/reins/internal/store"
)

// testRunningTools checks the marks of tool uses running outside the log:
// they are per session and survive only committed transactions.
func testRunningTools(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s, "agent_a")
	b := newSession(t, s, "agent_a")
	running := func(id string) []string {
		t.Helper()
		var out []string
		if _, err := s.UpdateSession(ctx, id, func(tx store.Tx) error {
			var err error
			out, err = tx.ToolsRunning()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	mark := func(id string, uses ...string) {
		t.Helper()
		if _, err := s.UpdateSession(ctx, id, func(tx store.Tx) error {
			for _, u := range uses {
				if err := tx.MarkToolRunning(u); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	mark(a.ID, "tu_1", "tu_2", "tu_1") // marking twice is harmless
	mark(b.ID, "tu_9")
	if got := running(a.ID); !slices.Equal(got, []string{"tu_1", "tu_2"}) {
		t.Fatalf("running in a = %v", got)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateSession(ctx, a.ID, func(tx store.Tx) error {
		if err := tx.MarkToolRunning("tu_3"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := running(a.ID); len(got) != 2 {
		t.Fatalf("a rolled-back mark is visible: %v", got)
	}
	if _, err := s.UpdateSession(ctx, a.ID, func(tx store.Tx) error { return tx.UnmarkToolRunning("tu_1") }); err != nil {
		t.Fatal(err)
	}
	if got := running(a.ID); !slices.Equal(got, []string{"tu_2"}) {
		t.Fatalf("after unmarking tu_1: %v", got)
	}
	if _, err := s.UpdateSession(ctx, a.ID, func(tx store.Tx) error { return tx.UnmarkToolRunning("") }); err != nil {
		t.Fatal(err)
	}
	if got := running(a.ID); len(got) != 0 {
		t.Fatalf("after unmarking all: %v", got)
	}
	if got := running(b.ID); !slices.Equal(got, []string{"tu_9"}) {
		t.Fatalf("another session's marks changed: %v", got)
	}
	// A session deletes with its marks in place.
	if err := s.DeleteSession(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
}
