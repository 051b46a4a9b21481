// Package bus carries "session S changed" wake-ups between the parts of a
// reins process. It never carries events: a subscriber that is woken reads
// the store. Losing a wake-up costs latency, not data, because every waiter
// also re-checks on a timer.
package bus

import "sync"

// Bus is an in-process wake-up bus. The zero value is not usable; call New.
type Bus struct {
	mu   sync.Mutex
	subs map[string]map[*Sub]struct{}
}

// New returns an empty Bus.
func New() *Bus { return &Bus{subs: make(map[string]map[*Sub]struct{})} }

// Sub is one subscription to a session's wake-ups.
type Sub struct {
	// C receives a value when the session changed. It has a buffer of one:
	// wake-ups that arrive while one is pending are merged.
	C   chan struct{}
	b   *Bus
	key string
}

// Subscribe returns a subscription to key's wake-ups. Call Close when done.
func (b *Bus) Subscribe(key string) *Sub {
	s := &Sub{C: make(chan struct{}, 1), b: b, key: key}
	b.mu.Lock()
	m := b.subs[key]
	if m == nil {
		m = make(map[*Sub]struct{})
		b.subs[key] = m
	}
	m[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close ends the subscription.
func (s *Sub) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if m := s.b.subs[s.key]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(s.b.subs, s.key)
		}
	}
}

// Publish wakes every subscriber of key. It never blocks.
func (b *Bus) Publish(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[key] {
		select {
		case s.C <- struct{}{}:
		default:
		}
	}
}
