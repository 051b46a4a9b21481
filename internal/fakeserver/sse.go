package fakeserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// SSE writes server-sent events, flushing each one and pausing Delay before
// it. Its methods report false once the client or the server has gone.
type SSE struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	r     *http.Request
	done  <-chan struct{}
	Delay time.Duration
}

// NewSSE starts an event stream on w with status 200.
func NewSSE(w http.ResponseWriter, r *http.Request, done <-chan struct{}, delay time.Duration) *SSE {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	return &SSE{w: w, rc: rc, r: r, done: done, Delay: delay}
}

// Event writes one event: an "event:" line when name is set, then data
// marshalled as JSON (a string or []byte is written as is).
func (s *SSE) Event(name string, data any) bool {
	if !s.wait(s.Delay) {
		return false
	}
	var payload []byte
	switch d := data.(type) {
	case string:
		payload = []byte(d)
	case []byte:
		payload = d
	default:
		var err error
		if payload, err = json.Marshal(d); err != nil {
			panic(fmt.Sprintf("fakeserver: marshal event: %v", err))
		}
	}
	if name != "" {
		if _, err := fmt.Fprintf(s.w, "event: %s\n", name); err != nil {
			return false
		}
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", payload); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// Disconnect drops the connection abruptly, without ending the response
// body, as a failing network or proxy would.
func (s *SSE) Disconnect() {
	_ = s.rc.Flush()
	panic(http.ErrAbortHandler)
}

func (s *SSE) wait(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-s.r.Context().Done():
			return false
		case <-s.done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.r.Context().Done():
		return false
	case <-s.done:
		return false
	}
}

// Sleep pauses d, giving up early (and returning false) when the client
// gives up or the server closes.
func Sleep(r *http.Request, done <-chan struct{}, d time.Duration) bool {
	s := SSE{r: r, done: done}
	return s.wait(d)
}

// Hang blocks until the client gives up or the server closes.
func Hang(r *http.Request, done <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-done:
	}
}

// WriteJSON writes v as a JSON response with status and extra headers.
func WriteJSON(w http.ResponseWriter, status int, header http.Header, v any) {
	for k, vs := range header {
		for _, x := range vs {
			w.Header().Add(k, x)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	switch b := v.(type) {
	case string:
		_, _ = w.Write([]byte(b))
	default:
		_ = json.NewEncoder(w).Encode(v)
	}
}

// Words splits s into the pieces a fake streams as deltas: each word with
// the spaces that follow it, so that the pieces concatenate back to s.
func Words(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		j := i
		for j < len(s) && s[j] == ' ' {
			j++
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}
