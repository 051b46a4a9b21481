package httpapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// tailRing bounds the recent log entries a tail keeps for its streams, in
// number and in bytes of event JSON: an event may be as large as a request
// body (32 MiB), and a stream that needs entries the ring does not hold
// reads them from the store. The tail reads the log within tailRingBytes
// too, so that an event larger than the ring is never read by it.
const (
	tailRing      = 4096
	tailRingBytes = 8 << 20
)

// tailStore is what tails read of the store: a session's log, and whether
// the session still exists.
type tailStore interface {
	ReadLogRaw(ctx context.Context, sessionID string, after int64, limit int, maxBytes int64) ([]store.Entry, error)
	LastSeq(ctx context.Context, sessionID string) (int64, error)
	GetSession(ctx context.Context, id string) (ma.Session, error)
}

// tails shares one reader of a session's log among all the streams open on
// that session: each new entry is read from the store once, whatever the
// number of subscribers.
type tails struct {
	store tailStore
	bus   *bus.Bus
	poll  time.Duration
	// ctx is cancelled by close, which then waits for the tails' readers.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards m and closed. It is held while a tail's subscribers are
	// added or removed, so that a tail leaves m with its last subscriber.
	mu     sync.Mutex
	m      map[string]*tail
	closed bool
}

func newTails(st tailStore, b *bus.Bus, poll time.Duration) *tails {
	ctx, cancel := context.WithCancel(context.Background())
	return &tails{store: st, bus: b, poll: poll, ctx: ctx, cancel: cancel, m: map[string]*tail{}}
}

// close stops every tail's reader and waits for them to return. Tails made
// after close have no reader of their own; their streams read the store.
func (ts *tails) close() {
	ts.mu.Lock()
	ts.closed = true
	ts.mu.Unlock()
	ts.cancel()
	ts.wg.Wait()
}

// tail is the shared reader of one session.
type tail struct {
	t    *tails
	id   string
	stop context.CancelFunc // ends the reader

	readMu sync.Mutex // held by read: one read of the log at a time

	mu      sync.Mutex // guards the fields below
	ring    ring       // the most recent entries
	seq     int64      // last seq read
	deleted bool       // the session is gone
	subs    map[chan struct{}]struct{}
}

// subscribe returns the session's tail and a channel that is signalled when
// it has news. Call release when done.
func (ts *tails) subscribe(ctx context.Context, id string) (*tail, chan struct{}, func(), error) {
	// Read the log's end before taking the lock, so that a slow store
	// does not hold up the streams of other sessions.
	seq, err := ts.store.LastSeq(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t == nil {
		t = ts.start(id, seq)
	}
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	t.subs[ch] = struct{}{}
	t.mu.Unlock()
	release := func() {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		t.mu.Lock()
		delete(t.subs, ch)
		empty := len(t.subs) == 0
		t.mu.Unlock()
		if empty && ts.m[id] == t {
			delete(ts.m, id)
			t.stop()
		}
	}
	return t, ch, release, nil
}

// start makes the tail of session id, whose log ends at seq, and starts
// its reader. ts.mu is held.
func (ts *tails) start(id string, seq int64) *tail {
	tctx, cancel := context.WithCancel(ts.ctx)
	t := &tail{t: ts, id: id, seq: seq, subs: map[chan struct{}]struct{}{}, stop: cancel}
	ts.m[id] = t
	if !ts.closed {
		sub := ts.bus.Subscribe(id)
		ts.wg.Go(func() { t.run(tctx, sub) })
	}
	return t
}

func (t *tail) run(ctx context.Context, sub *bus.Sub) {
	defer sub.Close()
	tick := time.NewTicker(t.t.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.C:
		case <-tick.C:
		}
		t.read(ctx)
	}
}

// read fetches the new entries once and wakes every subscriber. Streams
// call it too, to see entries committed before a preview they hold. It
// reads within tailRingBytes at a time, and skips (as heads) the entries
// larger than the ring.
func (t *tail) read(ctx context.Context) {
	t.readMu.Lock()
	defer t.readMu.Unlock()
	t.mu.Lock()
	last := t.seq
	t.mu.Unlock()
	after := last
	var fresh ring
	gap := false // fresh does not continue the ring
	for {
		entries, err := t.t.store.ReadLogRaw(ctx, t.id, after, streamBatch, tailRingBytes)
		if err != nil {
			return
		}
		if len(entries) == 0 {
			break
		}
		n := len(entries)
		if head := entries[n-1]; head.Head() {
			// Read again from there, or, larger than the ring, skip it.
			entries = entries[:n-1]
			if len(entries) == 0 {
				fresh.reset()
				gap = true
				after = head.Seq
				continue
			}
		}
		if fresh.push(entries...) {
			gap = true
		}
		after = entries[len(entries)-1].Seq
		if n < streamBatch && len(entries) == n {
			break
		}
	}
	deleted := false
	if after == last {
		if _, err := t.t.store.GetSession(ctx, t.id); errors.Is(err, store.ErrNotFound) {
			deleted = true
		} else {
			return
		}
	}
	t.mu.Lock()
	if gap {
		t.ring.reset()
	}
	t.ring.push(fresh.entries...)
	t.seq = after
	t.deleted = deleted
	for ch := range t.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
}

// since returns the entries after seq. ok is false when the ring does not
// hold them all (the caller reads the store instead).
func (t *tail) since(seq int64) (entries []store.Entry, deleted, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq >= t.seq {
		return nil, t.deleted, true
	}
	r := t.ring.entries
	if len(r) == 0 || r[0].Seq > seq+1 {
		return nil, t.deleted, false
	}
	i := len(r)
	for i > 0 && r[i-1].Seq > seq {
		i--
	}
	// A copy: the ring drops (and clears) its oldest entries while the
	// stream writes these.
	return slices.Clone(r[i:]), t.deleted, true
}

// ring is a run of consecutive log entries, at most tailRing of them
// and tailRingBytes of event JSON.
type ring struct {
	entries []store.Entry
	bytes   int64
}

// push appends entries that follow the ring's and drops the oldest until
// it is within its bounds. It reports whether it dropped any.
func (r *ring) push(entries ...store.Entry) (dropped bool) {
	r.entries = append(r.entries, entries...)
	for _, e := range entries {
		r.bytes += int64(len(e.Raw))
	}
	drop := 0
	for drop < len(r.entries) && (len(r.entries)-drop > tailRing || r.bytes > tailRingBytes) {
		r.bytes -= int64(len(r.entries[drop].Raw))
		drop++
	}
	clear(r.entries[:drop]) // let the dropped events' memory go
	r.entries = r.entries[drop:]
	return drop > 0
}

// reset empties the ring.
func (r *ring) reset() {
	clear(r.entries)
	*r = ring{}
}
