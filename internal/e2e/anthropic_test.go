package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/model"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
)

// startWithFakeAnthropic runs reins with its anthropic provider pointed at
// a fake Messages API on loopback.
func startWithFakeAnthropic(t *testing.T) (*server, *fakeanthropic.Server) {
	fake := fakeanthropic.New(t)
	p := provider.New(provider.Options{APIKey: "test-key", BaseURL: fake.URL, HTTPClient: fake.Client()})
	return start(t, options{models: model.Router{"anthropic": p}}), fake
}

func errorStatuses(fs []frame) []string {
	var out []string
	for _, f := range fs {
		if f.Type == "session.error" {
			out = append(out, f.Error.Type+"/"+f.Error.RetryStatus.Type)
		}
	}
	return out
}

func TestAnthropicTurnWithPreviews(t *testing.T) {
	s, fake := startWithFakeAnthropic(t)
	fake.Push(fakeanthropic.Reply(fakeanthropic.ThinkingBlock("hmm"), fakeanthropic.TextBlock("Hello from the fake model")).WithDelay(5 * time.Millisecond))
	a := s.newAgent(t, provider.DefaultModel)
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID, "agent.message")
	s.send(t, sess.ID, userMessage("hi"))
	got := st.until(isIdle)
	var preview, final string
	var text string
	for _, f := range got {
		switch f.Type {
		case "event_start":
			preview = f.Started.ID
		case "event_delta":
			text += f.Delta.Content.Text
		case "agent.message":
			final = f.ID
			if f.Content[0].Text != "Hello from the fake model" {
				t.Fatalf("message %+v", f.Content)
			}
		}
	}
	if preview == "" || preview != final || text != "Hello from the fake model" {
		t.Fatalf("preview %q final %q deltas %q (%v)", preview, final, text, types(got))
	}
	if !slices.Contains(types(got), "agent.thinking") {
		t.Fatalf("no agent.thinking: %v", types(got))
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Raw), `"hi"`) {
		t.Fatalf("requests %d", len(reqs))
	}
}

func TestAnthropicFailurePolicy(t *testing.T) {
	s, fake := startWithFakeAnthropic(t)
	a := s.newAgent(t, provider.DefaultModel)
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID)

	// Two 529s then success.
	fake.Push(fakeanthropic.Failure(529, "overloaded_error", "Overloaded"))
	fake.Push(fakeanthropic.Failure(529, "overloaded_error", "Overloaded"))
	fake.Push(fakeanthropic.Text("recovered"))
	s.send(t, sess.ID, userMessage("one"))
	got := st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_overloaded_error/retrying", "model_overloaded_error/retrying"}) || got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("two 529s: %v %v", e, types(got))
	}

	// 529 on every attempt (3 with this server's policy): exhausted, and
	// a message queued during the turn is flushed.
	for range 3 {
		fake.Push(fakeanthropic.Failure(529, "overloaded_error", "Overloaded").WithDelay(50 * time.Millisecond))
	}
	s.send(t, sess.ID, userMessage("two"))
	st.until(func(f frame) bool { return f.Type == "session.status_running" })
	queued := s.send(t, sess.ID, userMessage("queued behind the failing turn"))[0].ID
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_overloaded_error/retrying", "model_overloaded_error/retrying", "model_overloaded_error/exhausted"}) {
		t.Fatalf("529 forever: %v", e)
	}
	if got[len(got)-1].StopReason.Type != "retries_exhausted" {
		t.Fatalf("idle %+v", got[len(got)-1].StopReason)
	}
	flushed := false
	for _, f := range got {
		if f.ID == queued && f.Flushed && f.ProcessedAt == nil {
			flushed = true
		}
	}
	if !flushed {
		t.Fatalf("queued message not flushed: %v", types(got))
	}

	// 402: billing, exhausted at once, no retry.
	before := len(fake.Requests())
	fake.Push(fakeanthropic.Failure(402, "billing_error", "Your credit balance is too low"))
	s.send(t, sess.ID, userMessage("three"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"billing_error/exhausted"}) || len(fake.Requests()) != before+1 {
		t.Fatalf("402: %v after %d calls", e, len(fake.Requests())-before)
	}

	// 429 with retry-after-ms: rate limited, retried after the delay.
	fake.Push(fakeanthropic.Failure(429, "rate_limit_error", "Rate limited").WithHeader("retry-after-ms", "30"))
	fake.Push(fakeanthropic.Text("after the rate limit"))
	s.send(t, sess.ID, userMessage("rate"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_rate_limited_error/retrying"}) || got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("429: %v %v", e, types(got))
	}

	// 401 (and 400/403/404): a retry cannot help.
	before = len(fake.Requests())
	fake.Push(fakeanthropic.Failure(401, "authentication_error", "invalid x-api-key"))
	s.send(t, sess.ID, userMessage("auth"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_request_failed_error/exhausted"}) || len(fake.Requests()) != before+1 {
		t.Fatalf("401: %v after %d calls", e, len(fake.Requests())-before)
	}

	// A stream that breaks mid-way is retried as a failed request.
	fake.Push(fakeanthropic.Text("partial answer that never finishes").ThenDisconnect())
	fake.Push(fakeanthropic.Text("second try"))
	s.send(t, sess.ID, userMessage("four"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_request_failed_error/retrying"}) || got[len(got)-4].Content[0].Text != "second try" {
		t.Fatalf("mid-stream disconnect: %v %v", e, types(got))
	}
}
