package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeModel answers each call with the next outcome of its script; the
// last outcome repeats.
type fakeModel struct {
	mu     sync.Mutex
	script []error // nil = success
	calls  int
	times  []time.Time
}

func (f *fakeModel) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	f.mu.Lock()
	i := min(f.calls, len(f.script)-1)
	f.calls++
	f.times = append(f.times, time.Now())
	err := f.script[i]
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	sink.TextDelta(0, "ok")
	return &model.Response{Content: []model.Block{{Type: model.BlockText, Text: "ok"}}, StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 3, OutputTokens: 1}}, nil
}

var (
	overloaded = &model.Error{Kind: model.KindOverloaded, StatusCode: 529, Message: "Overloaded"}
	billing    = &model.Error{Kind: model.KindBilling, StatusCode: 402, Message: "credit balance too low"}
	badRequest = &model.Error{Kind: model.KindInvalid, StatusCode: 400, Message: "bad request"}
	limited    = &model.Error{Kind: model.KindRateLimited, StatusCode: 429, Message: "rate limited", RetryAfter: 20 * time.Second}
)

type fixture struct {
	t     *testing.T
	st    store.Store
	h     *Harness
	model *fakeModel
	sid   string
}

// newFixture must run inside a synctest bubble.
func newFixture(t *testing.T, script ...error) *fixture {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	fm := &fakeModel{script: script}
	h := New(Config{Store: st, Writer: sessions.NewWriter(st), Bus: bus.New(), Model: fm, Retry: RetryPolicy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 30 * time.Second}})
	now := ma.Time(time.Now())
	sess, err := storetest.NewSession(context.Background(), st, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
		Agent: ma.SessionAgent{ID: "agent_x", Model: ma.ModelConfig{ID: "fake"}}, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, h: h, model: fm, sid: sess.ID}
	t.Cleanup(func() {
		h.Stop(context.Background())
		st.Close()
	})
	return f
}

func (f *fixture) send(ev ma.Event) string {
	f.t.Helper()
	if _, err := storetest.Append(context.Background(), f.st, f.sid, &ev); err != nil {
		f.t.Fatal(err)
	}
	if ev.Type == ma.EventUserInterrupt {
		f.h.Interrupt(f.sid, ev.SessionThreadID)
	} else {
		f.h.Wake(f.sid)
	}
	return ev.ID
}

func (f *fixture) message(text string) string {
	return f.send(ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: text}}})
}

func (f *fixture) events() []ma.Event {
	f.t.Helper()
	entries, err := f.st.ListEvents(context.Background(), f.sid, store.EventQuery{Limit: 1 << 20})
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]ma.Event, len(entries))
	for i, e := range entries {
		out[i] = e.Event
	}
	return out
}

// errorsOf returns "type/retry_status" of each session.error.
func errorsOf(evs []ma.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == ma.EventSessionError {
			out = append(out, e.Error.Type+"/"+e.Error.RetryStatus.Type)
		}
	}
	return out
}

func last(evs []ma.Event, typ string) ma.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	return ma.Event{}
}

func (f *fixture) status() string {
	s, err := f.st.GetSession(context.Background(), f.sid)
	if err != nil {
		f.t.Fatal(err)
	}
	return s.Status
}

func TestOverloadedTwiceThenSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, overloaded, overloaded, nil)
		f.message("hi")
		time.Sleep(time.Minute)
		synctest.Wait()
		evs := f.events()
		if got := errorsOf(evs); !slices.Equal(got, []string{"model_overloaded_error/retrying", "model_overloaded_error/retrying"}) {
			t.Fatalf("errors %v", got)
		}
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason.Type != ma.StopEndTurn || f.status() != ma.StatusIdle {
			t.Fatalf("idle %+v, status %s", idle.StopReason, f.status())
		}
		if last(evs, ma.EventAgentMessage).Content[0].Text != "ok" {
			t.Fatal("no answer after the retries")
		}
		// Backoff: at most 1 s, then at most 2 s (full jitter: anything
		// from zero).
		gap1, gap2 := f.model.times[1].Sub(f.model.times[0]), f.model.times[2].Sub(f.model.times[1])
		if gap1 > time.Second || gap2 > 2*time.Second {
			t.Fatalf("backoff gaps %s, %s", gap1, gap2)
		}
		// Every span closed: one end per start, the failed ones is_error.
		starts, ends, failedEnds := 0, 0, 0
		for _, e := range evs {
			switch e.Type {
			case ma.EventSpanModelRequestStart:
				starts++
			case ma.EventSpanModelRequestEnd:
				ends++
				if *e.IsError {
					failedEnds++
				}
			}
		}
		if starts != 3 || ends != 3 || failedEnds != 2 {
			t.Fatalf("spans: %d starts, %d ends, %d failed", starts, ends, failedEnds)
		}
	})
}

func TestOverloadedForeverExhaustsAndFlushesQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, overloaded)
		f.message("first")
		// Let the turn start, then queue a message behind it.
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		queued := f.message("second")
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		evs := f.events()
		want := []string{"model_overloaded_error/retrying", "model_overloaded_error/retrying", "model_overloaded_error/retrying", "model_overloaded_error/exhausted"}
		if got := errorsOf(evs); !slices.Equal(got, want) {
			t.Fatalf("errors %v, want %v", got, want)
		}
		if f.model.calls != 4 {
			t.Fatalf("%d model calls, want 4", f.model.calls)
		}
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason.Type != ma.StopRetriesExhausted {
			t.Fatalf("idle %+v", idle.StopReason)
		}
		var flushed ma.Event
		for _, e := range evs {
			if e.ID == queued {
				flushed = e
			}
		}
		if !flushed.Flushed || flushed.ProcessedAt != nil {
			t.Fatalf("queued message not flushed: %+v", flushed)
		}
		// A new message afterwards starts a fresh turn normally.
		f.model.mu.Lock()
		f.model.script = []error{nil}
		f.model.mu.Unlock()
		f.message("third")
		time.Sleep(time.Second)
		synctest.Wait()
		evs = f.events()
		if idle := last(evs, ma.EventStatusIdle); idle.StopReason.Type != ma.StopEndTurn {
			t.Fatalf("fresh turn ended with %+v", idle.StopReason)
		}
		// The flushed message never reached the model.
		for _, e := range evs {
			if e.ID == queued && e.ProcessedAt != nil {
				t.Fatal("flushed message processed later")
			}
		}
	})
}

func TestNonRetryableFailuresExhaustAtOnce(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{billing, "billing_error/exhausted"},
		{badRequest, "model_request_failed_error/exhausted"},
	} {
		t.Run(c.want, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, c.err)
				f.message("hi")
				time.Sleep(time.Minute)
				synctest.Wait()
				evs := f.events()
				if got := errorsOf(evs); !slices.Equal(got, []string{c.want}) || f.model.calls != 1 {
					t.Fatalf("errors %v after %d calls", got, f.model.calls)
				}
				if last(evs, ma.EventStatusIdle).StopReason.Type != ma.StopRetriesExhausted {
					t.Fatal("not idle/retries_exhausted")
				}
			})
		})
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, limited, nil)
		f.message("hi")
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := errorsOf(f.events()); !slices.Equal(got, []string{"model_rate_limited_error/retrying"}) {
			t.Fatalf("errors %v", got)
		}
		if gap := f.model.times[1].Sub(f.model.times[0]); gap < 20*time.Second {
			t.Fatalf("retried after %s, want >= the 20s retry-after", gap)
		}
	})
}

func TestInterruptEndsBackoffAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, limited) // 20 s retry-after
		f.message("hi")
		time.Sleep(time.Second) // inside the 20 s wait
		synctest.Wait()
		at := time.Now()
		f.send(ma.Event{Type: ma.EventUserInterrupt})
		synctest.Wait()
		evs := f.events()
		idle := last(evs, ma.EventStatusIdle)
		if idle.StopReason == nil || idle.StopReason.Type != ma.StopEndTurn || f.status() != ma.StatusIdle {
			t.Fatalf("after interrupt: %+v %s", idle.StopReason, f.status())
		}
		if time.Since(at) != 0 {
			t.Fatalf("interrupt took %s of fake time", time.Since(at))
		}
		if f.model.calls != 1 {
			t.Fatalf("model called %d times", f.model.calls)
		}
	})
}

func TestDelayPolicy(t *testing.T) {
	p := RetryPolicy{BaseDelay: time.Second, MaxDelay: 4 * time.Second}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: 4 * time.Second} {
		low := 0
		for range 400 {
			d := p.Delay(attempt, 0)
			if d < 0 || d > want {
				t.Fatalf("Delay(%d) = %s, want within [0, %s]", attempt, d, want)
			}
			if d < want/4 {
				low++
			}
		}
		// Full jitter: about a quarter of the waits fall below a quarter
		// of the bound (none did with the old ±50% jitter).
		if low < 40 {
			t.Errorf("Delay(%d): %d of 400 waits below %s, want about 100", attempt, low, want/4)
		}
	}
	if d := p.Delay(1, time.Minute); d != time.Minute {
		t.Fatalf("retry-after not honoured: %s", d)
	}
}

// flakyStore fails ReadLog while broken is set.
type flakyStore struct {
	store.Store
	mu     sync.Mutex
	broken bool
}

func (s *flakyStore) ReadLog(ctx context.Context, id string, after int64, limit int) ([]store.Entry, error) {
	s.mu.Lock()
	broken := s.broken
	s.mu.Unlock()
	if broken {
		return nil, errors.New("disk on fire")
	}
	return s.Store.ReadLog(ctx, id, after, limit)
}

func (s *flakyStore) set(b bool) { s.mu.Lock(); s.broken = b; s.mu.Unlock() }

func TestInternalFailurePolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		fs := &flakyStore{Store: f.st}
		f.h.Stop(context.Background())
		f.h = New(Config{Store: fs, Writer: sessions.NewWriter(f.st), Bus: bus.New(), Model: f.model})
		t.Cleanup(func() { f.h.Stop(context.Background()) })

		// One failure: retried from the log, the turn still completes.
		fs.set(true)
		f.message("hi")
		synctest.Wait()
		fs.set(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		evs := f.events()
		if got := errorsOf(evs); !slices.Equal(got, []string{"unknown_error/retrying"}) || last(evs, ma.EventStatusIdle).StopReason.Type != ma.StopEndTurn {
			t.Fatalf("after one failure: %v %+v", got, last(evs, ma.EventStatusIdle).StopReason)
		}
		// Failures that persist: exhausted, then terminal.
		fs.set(true)
		f.message("again")
		time.Sleep(time.Minute)
		synctest.Wait()
		evs = f.events()
		want := []string{"unknown_error/retrying", "unknown_error/retrying", "unknown_error/exhausted", "unknown_error/terminal"}
		if got := errorsOf(evs); !slices.Equal(got, want) {
			t.Fatalf("errors %v, want %v", got, want)
		}
		if f.status() != ma.StatusTerminated || last(evs, ma.EventStatusTerminated).ID == "" {
			t.Fatalf("status %s", f.status())
		}
	})
}

// requestModel records the requests it gets and echoes.
type requestModel struct {
	mu   sync.Mutex
	reqs []*model.Request
}

func (m *requestModel) Stream(_ context.Context, req *model.Request, _ model.Sink) (*model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return &model.Response{Content: []model.Block{{Type: model.BlockText, Text: strings.Repeat("answer ", 30)}}, StopReason: model.StopEndTurn}, nil
}

func TestLongConversationsAreCompacted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		rm := &requestModel{}
		f.h.Stop(context.Background())
		const window = 600 // tokens: about 2,400 bytes
		f.h = New(Config{Store: f.st, Writer: sessions.NewWriter(f.st), Bus: bus.New(), Model: rm, ContextWindow: func(string) int { return window }})
		t.Cleanup(func() { f.h.Stop(context.Background()) })
		for i := range 12 {
			f.message(fmt.Sprintf("message %d: %s", i, strings.Repeat("words ", 40)))
			time.Sleep(time.Second)
			synctest.Wait()
		}
		evs := f.events()
		compactions := 0
		for _, e := range evs {
			if e.Type == ma.EventAgentContextCompacted {
				compactions++
				if e.CompactedThrough == "" || !strings.Contains(e.Content[0].Text, "reins compacted") {
					t.Fatalf("compaction event %+v", e)
				}
			}
		}
		if compactions == 0 {
			t.Fatal("no compaction in a conversation far beyond the window")
		}
		if last(evs, ma.EventStatusIdle).StopReason.Type != ma.StopEndTurn {
			t.Fatal("the last turn did not end normally")
		}
		rm.mu.Lock()
		defer rm.mu.Unlock()
		for i, req := range rm.reqs {
			if est := estimateTokens(req.System, req.Messages, req.Tools); est > window {
				t.Fatalf("request %d estimated at %d tokens, over the %d window", i, est, window)
			}
		}
		lastReq := rm.reqs[len(rm.reqs)-1]
		first := lastReq.Messages[0].Content[0].Text
		if !strings.HasPrefix(first, "[reins compacted") || !strings.Contains(first, "message") {
			t.Fatalf("the compacted transcript starts with %q", first)
		}
		if got := lastReq.Messages[len(lastReq.Messages)-1].Content; !strings.Contains(got[len(got)-1].Text, "message 11") {
			t.Fatalf("the latest message is not kept verbatim: %+v", got)
		}
	})
}
