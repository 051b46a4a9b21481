package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeopenai"
	"github.com/reinsdev/reins/internal/model"
	provider "github.com/reinsdev/reins/internal/model/openai"
)

// TestOpenAIFailurePolicy is the error-policy table of
// TestAnthropicFailurePolicy against a fake Chat Completions server.
func TestOpenAIFailurePolicy(t *testing.T) {
	fake := fakeopenai.New(t)
	p := provider.New(provider.Options{APIKey: "test-key", BaseURL: fake.URL, HTTPClient: fake.Client()})
	s := start(t, options{models: model.Router{"openai": p}})
	a := s.newAgent(t, "openai/gpt-test")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	st := s.openStream(t, sess.ID, "agent.message")

	// A streamed answer with previews.
	fake.Push(fakeopenai.Text("hello from the chat completions fake"))
	s.send(t, sess.ID, userMessage("zero"))
	got := st.until(isIdle)
	if got[len(got)-4].Content[0].Text != "hello from the chat completions fake" {
		t.Fatalf("streamed answer: %v", types(got))
	}

	// 429 then 500 then success: two retrying errors of the right types.
	fake.Push(fakeopenai.Failure(429, "rate_limit_exceeded", "slow down").WithHeader("retry-after-ms", "20"))
	fake.Push(fakeopenai.Failure(500, "server_error", "boom"))
	fake.Push(fakeopenai.Text("recovered"))
	s.send(t, sess.ID, userMessage("one"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_rate_limited_error/retrying", "model_request_failed_error/retrying"}) || got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("429, 500, success: %v %v", e, types(got))
	}

	// 5xx on every attempt: exhausted, and the queued message is flushed.
	for range 3 {
		fake.Push(fakeopenai.Failure(503, "server_error", "unavailable").WithDelay(50 * time.Millisecond))
	}
	s.send(t, sess.ID, userMessage("two"))
	st.until(func(f frame) bool { return f.Type == "session.status_running" })
	queued := s.send(t, sess.ID, userMessage("queued"))[0].ID
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_request_failed_error/retrying", "model_request_failed_error/retrying", "model_request_failed_error/exhausted"}) ||
		got[len(got)-1].StopReason.Type != "retries_exhausted" {
		t.Fatalf("5xx forever: %v", e)
	}
	flushed := false
	for _, f := range got {
		flushed = flushed || (f.ID == queued && f.Flushed)
	}
	if !flushed {
		t.Fatal("queued message not flushed")
	}

	// insufficient_quota: billing, no retry.
	fake.Push(fakeopenai.Failure(429, "insufficient_quota", "You exceeded your current quota").WithCode("insufficient_quota"))
	s.send(t, sess.ID, userMessage("three"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"billing_error/exhausted"}) {
		t.Fatalf("insufficient_quota: %v", e)
	}

	// 401: exhausted at once as a failed request.
	fake.Push(fakeopenai.Failure(401, "invalid_api_key", "Incorrect API key"))
	s.send(t, sess.ID, userMessage("four"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_request_failed_error/exhausted"}) {
		t.Fatalf("401: %v", e)
	}

	// An overloaded error mid-stream: model_overloaded_error, retried.
	fake.Push(fakeopenai.Text("partial").ThenError("overloaded_error", "The server is overloaded"))
	fake.Push(fakeopenai.Text("fine now"))
	s.send(t, sess.ID, userMessage("overloaded"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_overloaded_error/retrying"}) || got[len(got)-4].Content[0].Text != "fine now" {
		t.Fatalf("overloaded mid-stream: %v %v", e, types(got))
	}

	// A stream cut mid-way is retried.
	fake.Push(fakeopenai.Text("partial").ThenDisconnect())
	fake.Push(fakeopenai.Text("whole"))
	s.send(t, sess.ID, userMessage("five"))
	got = st.until(isIdle)
	if e := errorStatuses(got); !slices.Equal(e, []string{"model_request_failed_error/retrying"}) || got[len(got)-4].Content[0].Text != "whole" {
		t.Fatalf("mid-stream disconnect: %v %v", e, types(got))
	}
}
