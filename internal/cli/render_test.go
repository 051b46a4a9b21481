package cli

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// renderAll feeds recorded stream frames (one JSON object each) to r.
func renderAll(t *testing.T, r *renderer, frames ...string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		var it streamItem
		if err := json.Unmarshal([]byte(f), &it); err != nil {
			t.Fatalf("bad frame %s: %v", f, err)
		}
		b.WriteString(r.Render(it))
	}
	return b.String()
}

const (
	running = `{"type":"session.status_running","id":"sevt_run","processed_at":"t"}`
	endTurn = `{"type":"session.status_idle","id":"sevt_idle","processed_at":"t","stop_reason":{"type":"end_turn"}}`
)

func TestRenderStreamedText(t *testing.T) {
	r := newRenderer(false, false)
	got := renderAll(t, r,
		running,
		`{"type":"span.model_request_start","id":"sevt_s","processed_at":"t"}`,
		`{"type":"event_start","event":{"type":"agent.message","id":"sevt_m"}}`,
		`{"type":"event_delta","event_id":"sevt_m","delta":{"type":"content_delta","index":0,"content":{"type":"text","text":"Hel"}}}`,
	)
	if got != "Hel" || !r.midLine || r.Working() {
		t.Fatalf("mid-stream: %q midLine=%v working=%v", got, r.midLine, r.Working())
	}
	got += renderAll(t, r,
		`{"type":"event_delta","event_id":"sevt_m","delta":{"type":"content_delta","index":0,"content":{"type":"text","text":"lo "}}}`,
		`{"type":"agent.message","id":"sevt_m","processed_at":"t","content":[{"type":"text","text":"Hello world"}]}`,
		`{"type":"span.model_request_end","id":"sevt_e","processed_at":"t","is_error":false}`,
		endTurn,
	)
	if got != "Hello world\n" {
		t.Errorf("got %q", got)
	}
	if r.Working() {
		t.Error("still working after idle")
	}
}

func TestRenderMessageWithoutPreviews(t *testing.T) {
	r := newRenderer(false, false)
	got := renderAll(t, r, running,
		`{"type":"agent.message","id":"sevt_m","processed_at":"t","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}`,
		endTurn)
	if got != "one\ntwo\n" {
		t.Errorf("got %q", got)
	}
}

func TestRenderDivergedPreview(t *testing.T) {
	r := newRenderer(false, false)
	got := renderAll(t, r,
		`{"type":"event_delta","event_id":"sevt_m","delta":{"type":"content_delta","index":0,"content":{"type":"text","text":"Draft"}}}`,
		`{"type":"agent.message","id":"sevt_m","processed_at":"t","content":[{"type":"text","text":"Final"}]}`)
	if got != "Draft\nFinal\n" {
		t.Errorf("got %q", got)
	}
}

func TestRenderCutShortPreview(t *testing.T) {
	r := newRenderer(false, false)
	got := renderAll(t, r, running,
		`{"type":"event_delta","event_id":"sevt_m","delta":{"type":"content_delta","index":0,"content":{"type":"text","text":"partial"}}}`,
		`{"type":"span.model_request_end","id":"sevt_e","processed_at":"t","is_error":true}`,
		`{"type":"session.error","id":"sevt_x","processed_at":"t","error":{"type":"model_request_failed_error","message":"stream cut (HTTP 500); retrying in 1s (attempt 2 of 4)","retry_status":{"type":"retrying"}}}`)
	want := "partial\nmodel request failed — retrying in 1s (attempt 2 of 4)…\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func sessionError(typ, status, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "session.error", "processed_at": "t",
		"error": map[string]any{"type": typ, "message": msg, "retry_status": map[string]any{"type": status}}})
	return string(b)
}

func TestRenderRetryStatuses(t *testing.T) {
	exhaustedIdle := `{"type":"session.status_idle","id":"sevt_i","processed_at":"t","stop_reason":{"type":"retries_exhausted"}}`
	tests := []struct {
		name   string
		frames []string
		want   string
	}{
		{
			name: "retrying then exhausted",
			frames: []string{running,
				sessionError("model_overloaded_error", "retrying", "Overloaded (HTTP 529); retrying in 1s (attempt 2 of 4)"),
				sessionError("model_overloaded_error", "retrying", "Overloaded (HTTP 529); retrying in 2.1s (attempt 3 of 4)"),
				sessionError("model_overloaded_error", "retrying", "Overloaded (HTTP 529); retrying in 4s (attempt 4 of 4)"),
				sessionError("model_overloaded_error", "exhausted", "Overloaded (HTTP 529)"),
				exhaustedIdle},
			want: "model overloaded — retrying in 1s (attempt 2 of 4)…\n" +
				"model overloaded — retrying in 2.1s (attempt 3 of 4)…\n" +
				"model overloaded — retrying in 4s (attempt 4 of 4)…\n" +
				"turn abandoned after 4 attempts: the model is overloaded; send a new message to try again\n" +
				"  server said: Overloaded (HTTP 529)\n",
		},
		{
			name: "exhausted at once",
			frames: []string{running,
				sessionError("billing_error", "exhausted", "Your credit balance is too low (HTTP 402)"),
				exhaustedIdle},
			want: "turn abandoned after 1 attempt: the model provider refused the request for billing reasons; send a new message to try again\n" +
				"  server said: Your credit balance is too low (HTTP 402)\n",
		},
		{
			name: "rate limited, retry message in another shape",
			frames: []string{running,
				sessionError("model_rate_limited_error", "retrying", "slow down")},
			want: "model rate limit reached — retrying… (slow down)\n",
		},
		{
			name: "terminal",
			frames: []string{running,
				sessionError("unknown_error", "terminal", "the container is gone"),
				`{"type":"session.status_terminated","id":"sevt_t","processed_at":"t"}`},
			want: "an error occurred: the session was terminated and accepts no more input\n" +
				"  server said: the container is gone\n" +
				"the session was terminated and accepts no more input\n",
		},
		{
			name:   "mcp server named",
			frames: []string{running, `{"type":"session.error","processed_at":"t","error":{"type":"mcp_connection_failed_error","message":"dial tcp: refused","mcp_server_name":"github","retry_status":{"type":"retrying"}}}`},
			want:   "cannot reach MCP server github — retrying… (dial tcp: refused)\n",
		},
		{
			name:   "exhausted idle without an error seen",
			frames: []string{running, exhaustedIdle},
			want:   "the turn was abandoned after its retries ran out; send a new message to try again\n",
		},
		{
			name: "a new turn counts attempts afresh",
			frames: []string{running,
				sessionError("model_overloaded_error", "retrying", "x; retrying in 1s (attempt 2 of 4)"),
				endTurn, running,
				sessionError("model_overloaded_error", "exhausted", "x")},
			want: "model overloaded — retrying in 1s (attempt 2 of 4)…\n" +
				"turn abandoned after 1 attempt: the model is overloaded; send a new message to try again\n  server said: x\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderAll(t, newRenderer(false, false), tt.frames...)
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestRenderTools(t *testing.T) {
	r := newRenderer(false, false)
	got := renderAll(t, r, running,
		`{"type":"agent.tool_use","id":"sevt_tu","processed_at":"t","name":"bash","input":{"command":"ls"},"evaluated_permission":"ask"}`,
		`{"type":"agent.custom_tool_use","id":"sevt_cu","processed_at":"t","name":"get_weather","input":{"city":"Paris"}}`,
		`{"type":"session.status_idle","id":"sevt_i","processed_at":"t","stop_reason":{"type":"requires_action","event_ids":["sevt_tu","sevt_cu"]}}`,
		`{"type":"user.tool_confirmation","id":"sevt_c","processed_at":"t","tool_use_id":"sevt_tu","result":"allow"}`,
		`{"type":"user.custom_tool_result","id":"sevt_r","processed_at":"t","custom_tool_use_id":"sevt_cu","content":[{"type":"text","text":"sunny"}]}`,
		running,
		`{"type":"agent.tool_result","id":"sevt_tr","processed_at":"t","tool_use_id":"sevt_tu","content":[{"type":"text","text":"a.txt\nb.txt"}],"is_error":false}`,
		`{"type":"agent.tool_use","id":"sevt_tu2","processed_at":"t","name":"rm","input":{},"evaluated_permission":"deny"}`,
		`{"type":"agent.tool_result","id":"sevt_tr2","processed_at":"t","tool_use_id":"sevt_tu2","content":[{"type":"text","text":"not allowed"}],"is_error":true}`,
		`{"type":"user.tool_confirmation","id":"sevt_c2","processed_at":"t","tool_use_id":"sevt_tu2","result":"deny","deny_message":"no"}`,
		`{"type":"agent.mcp_tool_use","id":"sevt_mu","processed_at":"t","mcp_server_name":"gh","name":"search","input":{"q":"x"},"evaluated_permission":"allow"}`,
		`{"type":"agent.mcp_tool_result","id":"sevt_mr","processed_at":"t","mcp_tool_use_id":"sevt_mu","content":[]}`,
		endTurn)
	want := `→ bash {"command":"ls"}  (needs approval)
→ custom tool get_weather {"city":"Paris"}
waiting for approval of bash, the result of custom tool get_weather
✓ approved bash
← get_weather: sunny
← bash: a.txt b.txt
→ rm {}  (blocked)
← rm failed: not allowed
✗ denied rm: no
→ gh/search {"q":"x"}
← search: (no output)
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if ev, ok := r.Tool("sevt_cu"); !ok || ev.Name != "get_weather" {
		t.Errorf("Tool(sevt_cu) = %+v, %v", ev, ok)
	}
}

func TestRenderUserEvents(t *testing.T) {
	queued := `{"type":"user.message","id":"sevt_u","processed_at":null,"content":[{"type":"text","text":"hi"}]}`
	processed := `{"type":"user.message","id":"sevt_u","processed_at":"t","content":[{"type":"text","text":"hi"}]}`
	flushed := `{"type":"user.message","id":"sevt_u2","processed_at":"t","flushed":true,"content":[{"type":"text","text":"later"}]}`

	// run does not repeat the prompt; tail shows it once.
	if got := renderAll(t, newRenderer(false, false), queued, processed); got != "" {
		t.Errorf("run shows the prompt: %q", got)
	}
	if got := renderAll(t, newRenderer(false, true), queued, processed); got != "› hi\n" {
		t.Errorf("tail: %q", got)
	}
	got := renderAll(t, newRenderer(false, false),
		`{"type":"user.message","id":"sevt_u2","processed_at":null,"content":[{"type":"text","text":"later"}]}`, flushed,
		`{"type":"user.interrupt","id":"sevt_i","processed_at":"t"}`,
		`{"type":"agent.thinking","id":"sevt_th","processed_at":"t"}`,
		`{"type":"agent.thread_context_compacted","id":"sevt_cc","processed_at":"t"}`,
		`{"type":"session.status_rescheduled","id":"sevt_rs","processed_at":"t"}`,
		`{"type":"session.deleted","id":"sevt_d","processed_at":"t"}`)
	want := "not processed (the turn before it failed): later\n" +
		"interrupted\n" +
		"… thinking\n" +
		"(earlier turns were compacted to fit the context window)\n" +
		"the session is being rescheduled; it resumes by itself\n" +
		"the session was deleted\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderColour(t *testing.T) {
	got := renderAll(t, newRenderer(true, false), running,
		sessionError("billing_error", "exhausted", "no money"))
	if !strings.HasPrefix(got, "\x1b[31mturn abandoned") || !strings.Contains(got, "\x1b[0m\n") {
		t.Errorf("no red: %q", got)
	}
	// Streamed text is never coloured.
	got = renderAll(t, newRenderer(true, false),
		`{"type":"agent.message","id":"sevt_m","processed_at":"t","content":[{"type":"text","text":"plain"}]}`)
	if got != "plain\n" {
		t.Errorf("got %q", got)
	}
}

func TestRenderLinesAfterStreamedTextStartFresh(t *testing.T) {
	r := newRenderer(false, false)
	got := renderAll(t, r, running,
		`{"type":"event_delta","event_id":"sevt_m","delta":{"type":"content_delta","index":0,"content":{"type":"text","text":"thinking aloud"}}}`,
		sessionError("model_overloaded_error", "retrying", "x; retrying in 1s (attempt 2 of 4)"))
	if got != "thinking aloud\nmodel overloaded — retrying in 1s (attempt 2 of 4)…\n" {
		t.Errorf("got %q", got)
	}
}

func TestConsoleWithoutTerminal(t *testing.T) {
	var b strings.Builder
	c := newConsole(&b, false, false)
	c.Write("a", true)
	c.Write("b\n", false)
	c.Close()
	if b.String() != "ab\n" {
		t.Errorf("got %q", b.String())
	}
}

func TestConsoleSpinner(t *testing.T) {
	var b syncBuilder
	c := newConsole(&b, true, false)
	c.Write("", true)
	for start := time.Now(); !strings.Contains(b.String(), "working…"); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("no spinner frame")
		}
	}
	c.Write("text\n", false)
	c.Close()
	out := b.String()
	i := strings.LastIndex(out, "working…")
	if !strings.Contains(out[i:], "\r\x1b[Ktext\n") {
		t.Errorf("the spinner was not cleared before text: %q", out)
	}
}

// syncBuilder is a strings.Builder safe for a writer and a reader.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUnescapeJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"echo a \u003e b \u0026\u0026 cat \u003c b"}`: `{"command":"echo a > b && cat < b"}`,
		`{"s":"a\\u003e"}`:   `{"s":"a\\u003e"}`, // an escaped backslash, then text
		`{"s":"\"\u003e"}`:   `{"s":"\">"}`,
		`{"s":"\u00e9"}`:     `{"s":"\u00e9"}`,
		`{"s":"plain"}`:      `{"s":"plain"}`,
		`{"s":"trailing\\"}`: `{"s":"trailing\\"}`,
	} {
		if got := unescapeJSON(in); got != want {
			t.Errorf("unescapeJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestRenderPullWorkerTurn: a pull worker's tool use is awaited, not asked
// for, and its user.tool_result is shown.
func TestRenderPullWorkerTurn(t *testing.T) {
	r := newRenderer(false, true)
	var out strings.Builder
	for _, f := range []string{
		`{"type":"agent.tool_use","id":"sevt_u","name":"bash","input":{"command":"echo a \u003e f"},"evaluated_permission":"allow"}`,
		`{"type":"session.status_idle","id":"sevt_i","stop_reason":{"type":"requires_action","event_ids":["sevt_u"]}}`,
		`{"type":"user.tool_result","id":"sevt_r","tool_use_id":"sevt_u","content":[{"type":"text","text":"done"}]}`,
	} {
		var it streamItem
		if err := json.Unmarshal([]byte(f), &it); err != nil {
			t.Fatal(err)
		}
		out.WriteString(r.Render(it))
	}
	want := "→ bash {\"command\":\"echo a > f\"}\nwaiting for a worker to run bash\n← bash: done\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	if !r.AwaitsWorker("sevt_u") {
		t.Error("an allowed built-in tool use of a requires_action idle is not a worker's")
	}
}
