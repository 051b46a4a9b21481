package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestCompactionLimitReached: when compacting does not bring a request
// under the context window (here a system prompt alone fills most of it),
// the harness compacts again and again at each later turn boundary; after
// MaxCompactions in a row without a model message or tool call, the turn
// ends with an exhausted compaction_limit_reached_error and the session
// goes idle with retries_exhausted.
func TestCompactionLimitReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 3
		f := newFixture(t, nil)
		f.h.Stop(context.Background())
		var window atomic.Int64
		window.Store(200_000)
		f.h = New(Config{Store: f.st, Writer: sessions.NewWriter(f.st), Bus: bus.New(), Model: &requestModel{}, MaxCompactions: limit,
			ContextWindow: func(string) int { return int(window.Load()) }})
		t.Cleanup(func() { f.h.Stop(context.Background()) })
		now := ma.Time(time.Now())
		sess, err := storetest.NewSession(context.Background(), f.st, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
			Agent: ma.SessionAgent{ID: "agent_x", Model: ma.ModelConfig{ID: "fake"}, System: strings.Repeat("s", 3400)}, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		f.sid = sess.ID
		turn := func(text string) {
			f.message(text)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		for i := range 8 {
			turn(fmt.Sprintf("message %d", i))
		}
		// The window shrinks under the system prompt: about 850 of 1,000
		// tokens, over the 80% at which the harness compacts.
		window.Store(1000)
		turn("last")
		evs := f.events()
		lastMsg := slices.IndexFunc(evs, func(e ma.Event) bool {
			return e.Type == ma.EventUserMessage && e.ProcessedAt != nil && e.Content[0].Text == "last"
		})
		compactions := 0
		for _, e := range evs[lastMsg:] {
			if e.Type == ma.EventAgentContextCompacted {
				compactions++
			}
		}
		if got := errorsOf(evs); compactions != limit || !slices.Equal(got, []string{"compaction_limit_reached_error/exhausted"}) {
			t.Fatalf("%d compactions in the last turn, errors %v", compactions, got)
		}
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason.Type != ma.StopRetriesExhausted {
			t.Fatalf("idle %+v", idle.StopReason)
		}
	})
}
