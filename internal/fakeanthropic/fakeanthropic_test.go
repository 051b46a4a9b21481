package fakeanthropic_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/fakeanthropic"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func post(t *testing.T, srv *fakeanthropic.Server, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Test", "yes")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events returns the event names of an SSE body.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var names []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			names = append(names, name)
		}
	}
	return names
}

func TestWireFormatAndRecording(t *testing.T) {
	srv := fakeanthropic.New(t)
	srv.Push(fakeanthropic.Reply(fakeanthropic.TextBlock("a b"), fakeanthropic.ToolUseBlock("toolu_1", "x", `{"k":1}`)))
	resp := post(t, srv, `{"model":"claude-test","messages":[],"stream":true}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	got := strings.Join(events(t, resp.Body), ",")
	want := "message_start,ping," +
		"content_block_start,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_delta,content_block_stop," +
		"message_delta,message_stop"
	if got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Body["model"] != "claude-test" || reqs[0].Header.Get("X-Test") != "yes" || reqs[0].Path != "/v1/messages" {
		t.Errorf("recorded %+v", reqs)
	}
	if srv.Pending() != 0 {
		t.Errorf("pending = %d", srv.Pending())
	}
}

func TestFailureBodyAndDelay(t *testing.T) {
	srv := fakeanthropic.New(t)
	srv.Push(fakeanthropic.Failure(429, "rate_limit_error", "slow").WithHeader("retry-after", "3").WithDelay(50 * time.Millisecond))
	start := time.Now()
	resp := post(t, srv, `{}`)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("failure after %v, want the 50ms delay", d)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" ||
		!strings.Contains(string(b), `"error":{"message":"slow","type":"rate_limit_error"}`) {
		t.Errorf("%d %v %s", resp.StatusCode, resp.Header, b)
	}
}

func TestHangReleasedByClose(t *testing.T) {
	srv := fakeanthropic.New(t)
	srv.Push(fakeanthropic.Hang())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{}`))
		resp, err := srv.Client().Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	for len(srv.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	srv.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("hanging call ended without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hanging call")
	}
}

// tb records the errors a fake server reports when its test ends.
type tb struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (t *tb) Helper()          {}
func (t *tb) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (t *tb) Errorf(format string, args ...any) {
	t.errs = append(t.errs, fmt.Sprintf(format, args...))
}

func TestUnscriptedCallFailsTheTest(t *testing.T) {
	fake := &tb{}
	srv := fakeanthropic.New(fake)
	resp := post(t, srv, `{}`)
	if resp.StatusCode != 500 {
		t.Errorf("status %d, want 500", resp.StatusCode)
	}
	resp.Body.Close()
	for _, f := range fake.cleanups {
		f()
	}
	if len(fake.errs) != 1 || !strings.Contains(fake.errs[0], "no scripted response") {
		t.Errorf("errors = %q", fake.errs)
	}
}

func TestMessageWithoutStream(t *testing.T) {
	srv := fakeanthropic.New(t)
	srv.Push(fakeanthropic.Reply(fakeanthropic.TextBlock("a b"), fakeanthropic.ToolUseBlock("toolu_1", "x", `{"k":1}`)).
		WithUsage(fakeanthropic.Usage{InputTokens: 7, OutputTokens: 3, CacheReadInputTokens: 2}))
	resp := post(t, srv, `{"model":"claude-test","messages":[]}`)
	var m struct {
		Type    string `json:"type"`
		Model   string `json:"model"`
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("decode: %v (%s)", err, resp.Header.Get("Content-Type"))
	}
	if m.Type != "message" || m.Model != "claude-test" || len(m.Content) != 2 || m.Content[0].Text != "a b" ||
		string(m.Content[1].Input) != `{"k":1}` || m.StopReason != "tool_use" || m.Usage.InputTokens != 7 || m.Usage.OutputTokens != 3 {
		t.Errorf("message %+v", m)
	}
}
