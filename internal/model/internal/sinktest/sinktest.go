// Package sinktest provides a recording model.Sink for provider tests.
package sinktest

import "sync"

// Delta is one TextDelta call.
type Delta struct {
	Index int
	Text  string
}

// Recorder is a model.Sink that records every call.
type Recorder struct {
	mu       sync.Mutex // guards the fields below
	deltas   []Delta
	thinking int
}

// Thinking implements model.Sink.
func (r *Recorder) Thinking() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.thinking++
}

// TextDelta implements model.Sink.
func (r *Recorder) TextDelta(index int, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deltas = append(r.deltas, Delta{index, text})
}

// Deltas returns the recorded deltas in order.
func (r *Recorder) Deltas() []Delta {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delta(nil), r.deltas...)
}

// ThinkingCalls returns how many times Thinking was called.
func (r *Recorder) ThinkingCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.thinking
}

// Texts joins the deltas per text block index.
func (r *Recorder) Texts() []string {
	var out []string
	for _, d := range r.Deltas() {
		for len(out) <= d.Index {
			out = append(out, "")
		}
		out[d.Index] += d.Text
	}
	return out
}
