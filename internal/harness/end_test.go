package harness

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/store/storetest"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// releases is a tool.Placer that records when sessions are released.
type releases struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (r *releases) RunTool(context.Context, *ma.Session, tool.Call) tool.Result {
	return tool.Result{Content: []ma.ContentBlock{{Type: "text", Text: "ok"}}}
}
func (r *releases) Place(context.Context, *ma.Session) (*tool.Wait, error) { return nil, nil }
func (r *releases) Idle(string)                                            {}
func (r *releases) Release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.at[id]; !ok {
		r.at[id] = time.Now()
	}
}

func (r *releases) when(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[id]
	return at, ok
}

// TestEndReleasesAtOnce: the runner of an archived or deleted session
// leaves at once instead of lingering, releasing what it holds.
func TestEndReleasesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rel := &releases{at: map[string]time.Time{}}
		h := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: bus.New(), Model: &fakeModel{script: []error{nil}}, Tools: rel, IdleLinger: time.Minute})
		defer h.Stop(context.Background())
		now := ma.Time(time.Now())
		sess, err := storetest.NewSession(context.Background(), st, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
			Agent: ma.SessionAgent{ID: "agent_x", Model: ma.ModelConfig{ID: "fake"}}, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.Append(context.Background(), st, sess.ID,
			&ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}}); err != nil {
			t.Fatal(err)
		}
		h.Wake(sess.ID)
		time.Sleep(time.Second) // the turn ends; the runner lingers
		synctest.Wait()
		if _, ok := rel.when(sess.ID); ok {
			t.Fatal("released while lingering")
		}
		ended := time.Now()
		h.End(sess.ID)
		synctest.Wait()
		at, ok := rel.when(sess.ID)
		if !ok || at.Sub(ended) != 0 {
			t.Fatalf("released %v after End (ok %v), want at once", at.Sub(ended), ok)
		}
	})
}
