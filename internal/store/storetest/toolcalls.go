package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// testToolCalls checks the idempotency records of platform tool calls:
// the first call with a key is recorded and later ones get it back (one
// of concurrent calls wins), keys are per session, an outcome and a tool
// use stick, a deleted call frees its key, and deleting the session
// deletes its calls.
func testToolCalls(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s, "agent_a").ID
	b := newSession(t, s, "agent_a").ID
	now := time.Now().UTC().Truncate(time.Millisecond)
	begin := func(sess, key, hash string) (store.ToolCall, bool) {
		t.Helper()
		c, created, err := s.BeginToolCall(ctx, store.ToolCall{SessionID: sess, Key: key, RequestHash: hash, CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		return c, created
	}
	const parallel = 8
	var wg sync.WaitGroup
	wins := make(chan bool, parallel)
	for range parallel {
		wg.Go(func() {
			_, created, err := s.BeginToolCall(ctx, store.ToolCall{SessionID: a, Key: "k1", RequestHash: "h1", CreatedAt: now})
			if err != nil {
				t.Error(err)
			}
			wins <- created
		})
	}
	wg.Wait()
	close(wins)
	won := 0
	for w := range wins {
		if w {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent BeginToolCall created the call, want 1", won, parallel)
	}
	c, created := begin(a, "k1", "h2")
	if created || c.RequestHash != "h1" || c.Outcome != nil || c.ToolUseID != "" || !c.CreatedAt.Equal(now) {
		t.Fatalf("second begin: %+v created=%v", c, created)
	}
	if _, created := begin(b, "k1", "h2"); !created {
		t.Fatal("the same key in another session: not created")
	}
	if err := s.SetToolCallUse(ctx, a, "k1", "sevt_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishToolCall(ctx, a, "k1", []byte(`{"status":"completed"}`)); err != nil {
		t.Fatal(err)
	}
	if c, _ := begin(a, "k1", "h1"); c.ToolUseID != "sevt_1" || string(c.Outcome) != `{"status":"completed"}` {
		t.Fatalf("after finish: %+v", c)
	}
	if err := s.DeleteToolCall(ctx, a, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteToolCall(ctx, a, "k1"); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	if c, created := begin(a, "k1", "h3"); !created || c.RequestHash != "h3" {
		t.Fatalf("after delete: %+v created=%v", c, created)
	}
	if err := s.DeleteSession(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, created := begin(b, "k1", "h9"); !created {
		t.Fatal("a deleted session's call is still recorded")
	}
}
