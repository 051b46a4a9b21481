package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
	"github.com/reinsdev/reins/internal/model/internal/sinktest"
)

func newProvider(t *testing.T) (*anthropic.Provider, *fakeanthropic.Server) {
	t.Helper()
	srv := fakeanthropic.New(t)
	p := anthropic.New(anthropic.Options{APIKey: "sk-test", BaseURL: srv.URL, HTTPClient: srv.Client()})
	return p, srv
}

func newProviderAt(url string) *anthropic.Provider {
	return anthropic.New(anthropic.Options{APIKey: "sk-test", BaseURL: url, HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
}

func userText(text string) *model.Request {
	return &model.Request{
		Model:    anthropic.DefaultModel,
		System:   "You are terse.",
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: text}}}},
	}
}

func TestStreamText(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Text("Hello there, world").WithUsage(fakeanthropic.Usage{
		InputTokens: 12, OutputTokens: 7, CacheCreationInputTokens: 100, CacheReadInputTokens: 2000,
	}))
	var sink sinktest.Recorder
	resp, err := p.Stream(context.Background(), userText("hi"), &sink)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Block{{Type: model.BlockText, Text: "Hello there, world"}}
	if !reflect.DeepEqual(resp.Content, want) {
		t.Errorf("content = %+v, want %+v", resp.Content, want)
	}
	if resp.StopReason != model.StopEndTurn {
		t.Errorf("stop reason = %q", resp.StopReason)
	}
	wantUsage := model.Usage{InputTokens: 12, OutputTokens: 7, CacheCreationInputTokens: 100, CacheReadInputTokens: 2000}
	if resp.Usage != wantUsage {
		t.Errorf("usage = %+v, want %+v", resp.Usage, wantUsage)
	}
	if got := sink.Deltas(); len(got) != 3 {
		t.Errorf("deltas = %+v, want one per word", got)
	}
	if got := sink.Texts(); !reflect.DeepEqual(got, []string{"Hello there, world"}) {
		t.Errorf("sink texts = %q", got)
	}
	if resp.Thinking || sink.ThinkingCalls() != 0 {
		t.Error("thinking reported for a reply without thinking")
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("authorization = %q", got)
	}
	if r.Body["stream"] != true {
		t.Errorf("stream = %v, want true", r.Body["stream"])
	}
	if r.Body["model"] != anthropic.DefaultModel {
		t.Errorf("model = %v", r.Body["model"])
	}
	if r.Body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("max_tokens = %v", r.Body["max_tokens"])
	}
	if _, ok := r.Body["output_config"]; ok {
		t.Errorf("output_config sent without effort: %v", r.Body["output_config"])
	}
}

func TestParallelToolCalls(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Reply(
		fakeanthropic.TextBlock("Let me look."),
		fakeanthropic.ToolUseBlock("toolu_1", "read", `{"path":"a.txt"}`),
		fakeanthropic.ToolUseBlock("toolu_2", "bash", `{"command":"ls -l"}`),
		fakeanthropic.TextBlock("Both started."),
	))
	var sink sinktest.Recorder
	resp, err := p.Stream(context.Background(), userText("look"), &sink)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Block{
		{Type: model.BlockText, Text: "Let me look."},
		{Type: model.BlockToolUse, ID: "toolu_1", Name: "read", Input: json.RawMessage(`{"path":"a.txt"}`)},
		{Type: model.BlockToolUse, ID: "toolu_2", Name: "bash", Input: json.RawMessage(`{"command":"ls -l"}`)},
		{Type: model.BlockText, Text: "Both started."},
	}
	if !reflect.DeepEqual(resp.Content, want) {
		t.Errorf("content =\n%+v\nwant\n%+v", resp.Content, want)
	}
	if resp.StopReason != model.StopToolUse {
		t.Errorf("stop reason = %q, want tool_use", resp.StopReason)
	}
	// Text indexes count text blocks only: 0 and 1, not 0 and 3.
	if got := sink.Texts(); !reflect.DeepEqual(got, []string{"Let me look.", "Both started."}) {
		t.Errorf("sink texts = %q", got)
	}
}

func TestToolUseWithoutInput(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Reply(fakeanthropic.ToolUseBlock("toolu_1", "now", "")))
	resp, err := p.Stream(context.Background(), userText("time?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Content[0].Input); got != "{}" {
		t.Errorf("input = %s, want {}", got)
	}
}

func TestThinking(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Reply(fakeanthropic.ThinkingBlock("hmm let me see"), fakeanthropic.TextBlock("42")))
	var sink sinktest.Recorder
	resp, err := p.Stream(context.Background(), userText("?"), &sink)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Thinking || sink.ThinkingCalls() != 1 {
		t.Errorf("Thinking = %v, sink calls = %d; want true, 1", resp.Thinking, sink.ThinkingCalls())
	}
	if want := []model.Block{{Type: model.BlockText, Text: "42"}}; !reflect.DeepEqual(resp.Content, want) {
		t.Errorf("content = %+v", resp.Content)
	}
	if got := sink.Texts(); !reflect.DeepEqual(got, []string{"42"}) {
		t.Errorf("sink texts = %q (thinking must not shift text indexes)", got)
	}
}

func TestStopReasons(t *testing.T) {
	for api, want := range map[string]model.StopReason{
		"end_turn": model.StopEndTurn, "stop_sequence": model.StopEndTurn, "max_tokens": model.StopMaxTokens,
		"tool_use": model.StopToolUse, "refusal": model.StopRefusal, "model_context_window_exceeded": model.StopMaxTokens,
	} {
		p, srv := newProvider(t)
		srv.Push(fakeanthropic.Text("x").WithStopReason(api))
		resp, err := p.Stream(context.Background(), userText("?"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StopReason != want {
			t.Errorf("%s: stop reason %q, want %q", api, resp.StopReason, want)
		}
	}
}

func TestHangCancelledByContext(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Hang())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.Stream(ctx, userText("hi"), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	var me *model.Error
	if errors.As(err, &me) {
		t.Errorf("abandoned call returned a model error: %v", me)
	}
}

func TestCancelMidStream(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Text("one two three four five six").WithDelay(50 * time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	sink := cancelAfterFirstDelta{cancel: cancel}
	_, err := p.Stream(ctx, userText("hi"), sink)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

type cancelAfterFirstDelta struct{ cancel context.CancelFunc }

func (cancelAfterFirstDelta) Thinking()               {}
func (s cancelAfterFirstDelta) TextDelta(int, string) { s.cancel() }

func TestIdleTimeout(t *testing.T) {
	srv := fakeanthropic.New(t)
	p := anthropic.New(anthropic.Options{BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 300 * time.Millisecond})
	for name, resp := range map[string]fakeanthropic.Response{
		"no headers":    fakeanthropic.Hang(),
		"stalled body":  fakeanthropic.Text("one two").WithDelay(10 * time.Second),
		"stalled error": fakeanthropic.Failure(529, "overloaded_error", "x").WithDelay(10 * time.Second),
	} {
		srv.Push(resp)
		start := time.Now()
		_, err := p.Stream(context.Background(), userText("hi"), nil)
		var me *model.Error
		if !errors.As(err, &me) || me.Kind != model.KindRequestFailed || !strings.Contains(me.Message, "timed out") {
			t.Errorf("%s: err = %v, want a request_failed timeout", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: failed after %v", name, d)
		}
	}
	// A slow but steady stream is not idle: each event feeds the watchdog.
	srv.Push(fakeanthropic.Text("a b c d e f").WithDelay(30 * time.Millisecond))
	resp, err := p.Stream(context.Background(), userText("hi"), nil)
	if err != nil || resp.Content[0].Text != "a b c d e f" {
		t.Fatalf("steady stream: %v %+v", err, resp)
	}
}
