package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
	ma "github.com/reinsdev/reins/managedagents"
)

// fakeMessages is a minimal streaming Messages API: each call sends its
// first text delta at once (recording when), then finishes 20 ms later.
type fakeMessages struct {
	mu    sync.Mutex
	first []time.Time
	url   string
}

func newFakeMessages() *fakeMessages {
	f := &fakeMessages{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	f.url = "http://" + ln.Addr().String()
	go http.Serve(ln, http.HandlerFunc(f.serve))
	return f
}

func (f *fakeMessages) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	write := func(event, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
	}
	write("message_start", `{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-bench","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":0}}}`)
	write("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	fl.Flush()
	f.mu.Lock()
	f.first = append(f.first, time.Now())
	f.mu.Unlock()
	write("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)
	fl.Flush()
	time.Sleep(20 * time.Millisecond)
	write("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`)
	write("content_block_stop", `{"type":"content_block_stop","index":0}`)
	write("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`)
	write("message_stop", `{"type":"message_stop"}`)
	fl.Flush()
}

func (f *fakeMessages) provider() model.Provider {
	return anthropic.New(anthropic.Options{APIKey: "bench", BaseURL: f.url})
}

// firstToken measures, per turn, the time from the fake model flushing its
// first text delta to the client reading the matching event_delta.
func (b *bench) firstToken(f *fakeMessages, turns int) durations {
	var ag ma.Agent
	b.do("POST", "/v1/agents", map[string]any{"name": "bench-stream", "model": "claude-bench"}, &ag)
	var s ma.Session
	b.do("POST", "/v1/sessions", map[string]any{"agent": ag.ID, "environment_id": b.env}, &s)
	st := b.client.Open(b.url, s.ID, "?event_deltas[]=agent.message")
	defer st.Close()
	var out durations
	for i := range turns + 10 {
		b.do("POST", "/v1/sessions/"+s.ID+"/events", message, nil)
		st.WaitFor("event_delta")
		got := time.Now()
		f.mu.Lock()
		sent := f.first[len(f.first)-1]
		f.mu.Unlock()
		if i >= 10 { // warm-up turns excluded
			out = append(out, got.Sub(sent))
		}
		st.WaitFor(ma.EventStatusIdle)
	}
	return out
}
