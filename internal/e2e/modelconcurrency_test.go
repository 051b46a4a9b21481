package e2e

import (
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/model"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
)

// TestModelConcurrencyBound runs turns in four sessions at once with the
// server bounded to two model calls: the fake Messages API never sees
// more than two, and every turn still ends.
func TestModelConcurrencyBound(t *testing.T) {
	fake := fakeanthropic.New(t)
	p := provider.New(provider.Options{APIKey: "test-key", BaseURL: fake.URL, HTTPClient: fake.Client()})
	s := startWith(t, options{models: model.Router{"anthropic": p}}, func(c *app.Config) { c.ModelConcurrency = 2 })
	const sessions = 4
	for range sessions {
		fake.Push(fakeanthropic.Text("done").WithDelay(300 * time.Millisecond))
	}
	a := s.newAgent(t, "claude-sonnet-5-5")
	env := s.newEnv(t, "env")
	var streams []*stream
	for range sessions {
		sess := s.newSession(t, a.ID, env.ID)
		streams = append(streams, s.openStream(t, sess.ID))
		s.send(t, sess.ID, userMessage("hi"))
	}
	for _, st := range streams {
		st.until(isIdle)
	}
	if peak := fake.PeakConcurrency(); peak != 2 {
		t.Fatalf("the model server saw %d calls at once, want 2 (the bound)", peak)
	}
}
