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
// persisted. With a relay, the previews of the sessions another replica
// runs reach the streams here too.
type Previews struct {
	mu    sync.Mutex // guards subs
	subs  map[string]map[chan ma.Preview]struct{}
	relay PreviewRelay // set once, before use (SetRelay)
}

// PreviewRelay carries previews between the replicas that share a
// database. Its methods must not block.
type PreviewRelay interface {
	// Watch tells the other replicas that a stream here wants the
	// session's previews.
	Watch(sessionID string)
	// Forward carries a preview of a session run here to the replicas
	// that watch it.
	Forward(sessionID string, pv ma.Preview)
}

// SetRelay makes the previews cross replicas through r: every new
// subscription is watched, every preview published here is forwarded.
// Call it before the previews are used.
func (p *Previews) SetRelay(r PreviewRelay) { p.relay = r }

// Deliver hands a preview of a session another replica runs to the
// streams here. It never blocks.
func (p *Previews) Deliver(sessionID string, pv ma.Preview) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.subs[sessionID] {
		select {
		case ch <- pv:
		default: // shed under load
		}
	}
}

// Watched returns the sessions that streams here want the previews of.
func (p *Previews) Watched() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.subs))
	for id := range p.subs {
		ids = append(ids, id)
	}
	return ids
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
	if p.relay != nil {
		p.relay.Watch(sessionID)
	}
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

// publish hands a preview of a session run here to the streams here and
// to the relay.
func (p *Previews) publish(sessionID string, pv ma.Preview) {
	p.Deliver(sessionID, pv)
	if p.relay != nil {
		p.relay.Forward(sessionID, pv)
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
