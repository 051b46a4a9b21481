// Package bus carries "session S changed" wake-ups between the parts of a
// reins process. It never carries events: a subscriber that is woken reads
// the store. Losing a wake-up costs latency, not data, because every waiter
// also re-checks on a timer.
//
// The bus itself is in-process. Where several processes share a database,
// a Relay (package bus/pgnotify on PostgreSQL) carries what is published
// to the other processes, which Deliver it to their own buses.
package bus

import "sync"

// Bus is an in-process wake-up bus. The zero value is not usable; call New.
type Bus struct {
	relay Relay // set before use (SetRelay)

	mu   sync.Mutex // guards subs
	subs map[string]map[*Sub]struct{}
}

// Kind is what a wake-up asks of the process that gets it.
type Kind uint8

// Kinds of wake-ups.
const (
	// Changed: the key's state changed; subscribers read it again.
	Changed Kind = iota
	// Wake: the session has new work; its runner looks at it (the owner
	// of its lease, or whoever takes it).
	Wake
	// Interrupt: the session was interrupted; its runner stops its
	// current call.
	Interrupt
	// End: the session was archived or deleted; its runner leaves at once
	// and what it holds (its slot, sandbox, MCP connections) is freed.
	End
	// Watch: a stream of the sender wants the session's previews; the
	// replica that runs it relays them for a while (see pgnotify's data).
	Watch
)

// Note is a wake-up for another process.
type Note struct {
	Key  string
	Kind Kind
	// Thread, on an Interrupt, names the session's child thread
	// interrupted alone; empty, every thread is.
	Thread string
	// To, if set, names the one process the note is for (its relay
	// origin); the others ignore it.
	To string
}

// Relay carries wake-ups to the other processes that share the store. Send
// must not block.
type Relay interface {
	Send(Note)
}

// SetRelay makes Publish send every wake-up through r as well. Call it
// before the bus is used.
func (b *Bus) SetRelay(r Relay) { b.relay = r }

// Tell sends n to the other processes only (nothing without a relay).
func (b *Bus) Tell(n Note) {
	if b.relay != nil {
		b.relay.Send(n)
	}
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

// Publish wakes every subscriber of key, here and (through the relay) in
// the other processes. It never blocks.
func (b *Bus) Publish(key string) {
	b.Deliver(key)
	b.Tell(Note{Key: key, Kind: Changed})
}

// Deliver wakes every subscriber of key in this process: what a relay
// received from another process. It never blocks.
func (b *Bus) Deliver(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[key] {
		select {
		case s.C <- struct{}{}:
		default:
		}
	}
}
