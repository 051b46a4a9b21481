package fakeopenai_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/fakeopenai"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// chunks posts body and returns the data payloads of the stream.
func chunks(t *testing.T, srv *fakeopenai.Server, body string) []string {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestWireFormat(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Push(fakeopenai.Reply(fakeopenai.TextPart("a b"), fakeopenai.ToolCall("call_1", "x", `{"k":1}`)))
	srv.Push(fakeopenai.Text("c"))
	got := chunks(t, srv, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`)
	// role, 2 text deltas, 2 tool-call fragments, finish, usage, [DONE]
	if len(got) != 8 || got[len(got)-1] != "[DONE]" {
		t.Fatalf("chunks = %q", got)
	}
	var finish, usage struct {
		Object  string `json:"object"`
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(got[5]), &finish); err != nil || finish.Object != "chat.completion.chunk" ||
		len(finish.Choices) != 1 || finish.Choices[0].FinishReason == nil || *finish.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finish chunk %s", got[5])
	}
	if err := json.Unmarshal([]byte(got[6]), &usage); err != nil || len(usage.Choices) != 0 || usage.Usage == nil || usage.Usage.PromptTokens != 10 {
		t.Errorf("usage chunk %s", got[6])
	}
	// Without include_usage there is no usage chunk.
	if got := chunks(t, srv, `{"model":"m","stream":true}`); len(got) != 4 || strings.Contains(strings.Join(got, ""), "usage") {
		t.Errorf("chunks without include_usage = %q", got)
	}
}

func TestFailureWithCodeAndDelay(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Push(fakeopenai.Failure(429, "insufficient_quota", "quota").WithCode("insufficient_quota").WithDelay(30 * time.Millisecond))
	start := time.Now()
	resp, err := srv.Client().Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("failure after %v, want the delay", d)
	}
	var body struct {
		Error struct{ Type, Code, Message string } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusTooManyRequests ||
		body.Error.Code != "insufficient_quota" || body.Error.Type != "insufficient_quota" || body.Error.Message != "quota" {
		t.Errorf("%d %+v %v", resp.StatusCode, body, err)
	}
}

func TestCompletionWithoutStream(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Push(fakeopenai.Text("a b").WithUsage(fakeopenai.Usage{PromptTokens: 7, CompletionTokens: 3}))
	resp, err := srv.Client().Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("decode: %v (%s)", err, resp.Header.Get("Content-Type"))
	}
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content != "a b" || c.Choices[0].FinishReason != "stop" ||
		c.Usage.PromptTokens != 7 || c.Usage.CompletionTokens != 3 {
		t.Errorf("completion %+v", c)
	}
}
