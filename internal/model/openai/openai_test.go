package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeopenai"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/sinktest"
	"github.com/reinsdev/reins/internal/model/openai"
)

func newProvider(t *testing.T) (*openai.Provider, *fakeopenai.Server) {
	t.Helper()
	srv := fakeopenai.New(t)
	p := openai.New(openai.Options{APIKey: "sk-test", BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
	return p, srv
}

func userText(text string) *model.Request {
	return &model.Request{
		Model:    "openai/gpt-4o",
		System:   "You are terse.",
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: text}}}},
	}
}

// jsonEqual compares got (decoded JSON) with the JSON text want.
func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("%s =\n%s\nwant\n%s", what, g, want)
	}
}

func TestStreamText(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeopenai.Text("Hello there, world").WithUsage(fakeopenai.Usage{PromptTokens: 120, CompletionTokens: 7, CachedTokens: 100}))
	var sink sinktest.Recorder
	resp, err := p.Stream(context.Background(), userText("hi"), &sink)
	if err != nil {
		t.Fatal(err)
	}
	if want := []model.Block{{Type: model.BlockText, Text: "Hello there, world"}}; !reflect.DeepEqual(resp.Content, want) {
		t.Errorf("content = %+v", resp.Content)
	}
	if resp.StopReason != model.StopEndTurn {
		t.Errorf("stop reason = %q", resp.StopReason)
	}
	if want := (model.Usage{InputTokens: 20, OutputTokens: 7, CacheReadInputTokens: 100}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if got := sink.Deltas(); len(got) != 3 {
		t.Errorf("deltas = %+v, want one per word", got)
	}
	if got := sink.Texts(); !reflect.DeepEqual(got, []string{"Hello there, world"}) {
		t.Errorf("sink texts = %q", got)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1/chat/completions" {
		t.Errorf("path = %q", r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("authorization = %q", got)
	}
	if r.Body["model"] != "gpt-4o" {
		t.Errorf("model = %v, want the prefix stripped", r.Body["model"])
	}
	if r.Body["stream"] != true {
		t.Errorf("stream = %v", r.Body["stream"])
	}
	jsonEqual(t, "stream_options", r.Body["stream_options"], `{"include_usage":true}`)
	jsonEqual(t, "messages", r.Body["messages"], `[
		{"role":"system","content":"You are terse."},
		{"role":"user","content":[{"type":"text","text":"hi"}]}
	]`)
	for _, k := range []string{"tools", "max_completion_tokens", "reasoning_effort"} {
		if _, ok := r.Body[k]; ok {
			t.Errorf("%s sent: %v", k, r.Body[k])
		}
	}
}

func TestParallelToolCalls(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeopenai.Reply(
		fakeopenai.TextPart("Let me look."),
		fakeopenai.ToolCall("call_1", "read", `{"path":"a.txt"}`),
		fakeopenai.ToolCall("call_2", "bash", `{"command":"ls -l"}`),
		fakeopenai.ToolCall("call_3", "now", ``),
	))
	resp, err := p.Stream(context.Background(), userText("look"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Block{
		{Type: model.BlockText, Text: "Let me look."},
		{Type: model.BlockToolUse, ID: "call_1", Name: "read", Input: json.RawMessage(`{"path":"a.txt"}`)},
		{Type: model.BlockToolUse, ID: "call_2", Name: "bash", Input: json.RawMessage(`{"command":"ls -l"}`)},
		{Type: model.BlockToolUse, ID: "call_3", Name: "now", Input: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(resp.Content, want) {
		t.Errorf("content =\n%+v\nwant\n%+v", resp.Content, want)
	}
	if resp.StopReason != model.StopToolUse {
		t.Errorf("stop reason = %q", resp.StopReason)
	}
}

func TestToolCallsFinishedWithStop(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeopenai.Reply(fakeopenai.ToolCall("call_1", "read", `{}`)).WithFinishReason("stop"))
	resp, err := p.Stream(context.Background(), userText("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != model.StopToolUse {
		t.Errorf("stop reason = %q, want tool_use", resp.StopReason)
	}
}

func TestFinishReasons(t *testing.T) {
	for api, want := range map[string]model.StopReason{"stop": model.StopEndTurn, "length": model.StopMaxTokens, "content_filter": model.StopRefusal} {
		p, srv := newProvider(t)
		srv.Push(fakeopenai.Text("x").WithFinishReason(api))
		resp, err := p.Stream(context.Background(), userText("?"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StopReason != want {
			t.Errorf("%s: stop reason %q, want %q", api, resp.StopReason, want)
		}
	}
}

func TestReasoning(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeopenai.Reply(fakeopenai.Reasoning("let me think"), fakeopenai.TextPart("42")))
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
}

func TestEffortAndMaxTokens(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeopenai.Text("x"))
	req := userText("?")
	req.Effort, req.Speed, req.MaxTokens = "low", "fast", 300
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	b := srv.Requests()[0].Body
	if b["reasoning_effort"] != "low" || b["max_completion_tokens"] != float64(300) {
		t.Errorf("reasoning_effort = %v, max_completion_tokens = %v", b["reasoning_effort"], b["max_completion_tokens"])
	}
	for _, k := range []string{"speed", "service_tier"} {
		if _, ok := b[k]; ok {
			t.Errorf("%s sent", k)
		}
	}
}

func TestNoAPIKey(t *testing.T) {
	srv := fakeopenai.New(t)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	p := openai.New(openai.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
	srv.Push(fakeopenai.Text("x"))
	if _, err := p.Stream(context.Background(), userText("?"), nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("authorization = %q, want none (the environment is not read)", got)
	}
}

func TestHangCancelledByContext(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeopenai.Hang())
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
	srv.Push(fakeopenai.Text("one two three four five six").WithDelay(50 * time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	_, err := p.Stream(ctx, userText("hi"), cancelOnDelta{cancel})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

type cancelOnDelta struct{ cancel context.CancelFunc }

func (cancelOnDelta) Thinking()               {}
func (s cancelOnDelta) TextDelta(int, string) { s.cancel() }

func TestConnectionRefused(t *testing.T) {
	srv := fakeopenai.New(t)
	url := srv.URL
	srv.Close()
	p := openai.New(openai.Options{BaseURL: url, HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	_, err := p.Stream(context.Background(), userText("hi"), nil)
	var me *model.Error
	if !errors.As(err, &me) || me.Kind != model.KindRequestFailed {
		t.Fatalf("err = %v, want request_failed", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	srv := fakeopenai.New(t)
	p := openai.New(openai.Options{BaseURL: srv.URL, HTTPClient: srv.Client(), IdleTimeout: 300 * time.Millisecond})
	for name, resp := range map[string]fakeopenai.Response{
		"no headers":   fakeopenai.Hang(),
		"stalled body": fakeopenai.Text("one two").WithDelay(10 * time.Second),
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
	srv.Push(fakeopenai.Text("a b c d e f").WithDelay(30 * time.Millisecond))
	resp, err := p.Stream(context.Background(), userText("hi"), nil)
	if err != nil || resp.Content[0].Text != "a b c d e f" {
		t.Fatalf("steady stream: %v %+v", err, resp)
	}
}
