package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadEvent: events end at a blank line (LF or CRLF), keep their raw
// bytes, and a data line longer than the reader's buffer is read whole.
func TestReadEvent(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	in := "event: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: " + long + "\n\ndata: [DONE]\n"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	ev, err := readEvent(br)
	if err != nil || ev.name != "message_start" || string(ev.data) != `{"a":1}` || string(ev.raw) != "event: message_start\r\ndata: {\"a\":1}\r\n\r\n" {
		t.Fatalf("first event %+v %v", ev, err)
	}
	ev, err = readEvent(br)
	if err != nil || string(ev.data) != long {
		t.Fatalf("long event: %d bytes, %v", len(ev.data), err)
	}
	ev, err = readEvent(br)
	if !errors.Is(err, io.EOF) || string(ev.data) != "[DONE]" {
		t.Fatalf("last event %+v %v", ev, err)
	}
}

// TestAskUsage: an OpenAI stream is asked for its usage, keeping the
// client's other stream options; a client that asked gets it (no strip).
func TestAskUsage(t *testing.T) {
	body, strip, err := openaiWire{}.askUsage([]byte(`{"model":"m","stream":true,"stream_options":{"x":1}}`))
	var m struct {
		StreamOptions map[string]any `json:"stream_options"`
	}
	if err != nil || !strip || json.Unmarshal(body, &m) != nil || m.StreamOptions["include_usage"] != true || m.StreamOptions["x"] != float64(1) {
		t.Fatalf("asked: %s %v %v", body, strip, err)
	}
	in := []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`)
	if body, strip, err := (openaiWire{}).askUsage(in); err != nil || strip || string(body) != string(in) {
		t.Fatalf("already asked: %s %v %v", body, strip, err)
	}
	if _, _, err := (openaiWire{}).askUsage([]byte(`{"stream_options":3}`)); err == nil {
		t.Fatal("stream_options that is not an object: no error")
	}
}

// TestAnthropicStreamUsage: message_start's input counts and
// message_delta's cumulative output count make the usage.
func TestAnthropicStreamUsage(t *testing.T) {
	var st streamState
	for _, data := range []string{
		`{"type":"message_start","message":{"usage":{"input_tokens":12,"output_tokens":1,"cache_read_input_tokens":4}}}`,
		`{"type":"message_delta","usage":{"output_tokens":30}}`,
		`{"type":"message_stop"}`,
	} {
		anthropicWire{}.streamEvent(event{data: []byte(data)}, &st, false)
	}
	if u := st.usage; u.InputTokens != 12 || u.OutputTokens != 30 || u.CacheReadInputTokens != 4 || !st.done || st.err != nil {
		t.Fatalf("state %+v", st)
	}
}
