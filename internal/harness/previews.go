package harness

import (
	"sync"

	ma "github.com/reinsdev/reins/managedagents"
)

// previewBuffer bounds a subscriber's backlog of previews; beyond it
// previews are shed (allowed: deltas are a best-effort prefix).
const previewBuffer = 256

// Previews fans out stream-only preview events (event_start, event_delta)
// of running sessions to the streams that asked for them. Previews are never
// persisted.
type Previews struct {
	mu   sync.Mutex
	subs map[string]map[chan ma.Preview]struct{}
}

func newPreviews() *Previews { return &Previews{subs: make(map[string]map[chan ma.Preview]struct{})} }

// Subscribe returns a channel of the session's previews and a function that
// ends the subscription.
func (p *Previews) Subscribe(sessionID string) (<-chan ma.Preview, func()) {
	ch := make(chan ma.Preview, previewBuffer)
	p.mu.Lock()
	m := p.subs[sessionID]
	if m == nil {
		m = make(map[chan ma.Preview]struct{})
		p.subs[sessionID] = m
	}
	m[ch] = struct{}{}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if m := p.subs[sessionID]; m != nil {
			delete(m, ch)
			if len(m) == 0 {
				delete(p.subs, sessionID)
			}
		}
	}
}

func (p *Previews) publish(sessionID string, pv ma.Preview) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.subs[sessionID] {
		select {
		case ch <- pv:
		default: // shed under load
		}
	}
}

// previewSink turns a model stream into previews.
type previewSink struct {
	p          *Previews
	sessionID  string
	messageID  string
	thinkingID string
	started    bool
	thinking   bool
}

func (s *previewSink) Thinking() {
	if s.thinking {
		return
	}
	s.thinking = true
	s.p.publish(s.sessionID, ma.Preview{Type: "event_start", Event: &ma.PreviewEvent{Type: ma.EventAgentThinking, ID: s.thinkingID}})
}

func (s *previewSink) TextDelta(index int, text string) {
	if !s.started {
		s.started = true
		s.p.publish(s.sessionID, ma.Preview{Type: "event_start", Event: &ma.PreviewEvent{Type: ma.EventAgentMessage, ID: s.messageID}})
	}
	s.p.publish(s.sessionID, ma.Preview{Type: "event_delta", EventID: s.messageID,
		Delta: &ma.PreviewDelta{Type: "content_delta", Index: index, Content: ma.ContentBlock{Type: "text", Text: text}}})
}
