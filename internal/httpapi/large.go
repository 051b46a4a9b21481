package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/reinsdev/reins/internal/store"
)

// largeReads shares the reads of large log entries among the streams that
// send them at once: ten streams of a session that receive a 30 MiB event
// read it from the store once and hold it once, within the event budget,
// until the last of them has written it.
type largeReads struct {
	store  logReader
	budget *budget

	mu sync.Mutex // guards m and the refs of its reads
	m  map[largeKey]*largeRead
}

// logReader reads log entries whole (the store is one).
type logReader interface {
	// ReadLogRaw reads up to limit entries after seq after, undecoded.
	ReadLogRaw(ctx context.Context, sessionID string, after int64, limit int, maxBytes int64) ([]store.Entry, error)
}

// errEntryGone is the read of an entry whose session was deleted meanwhile.
var errEntryGone = errors.New("the log entry is gone")

type largeKey struct {
	session string
	seq     int64
}

// largeRead is one read of an entry and the streams that hold it.
type largeRead struct {
	done  chan struct{} // closed once entry or err is set
	entry store.Entry
	err   error
	refs  int    // streams holding the read, or waiting for it
	free  func() // gives back its budget
}

func newLargeReads(st logReader, b *budget) *largeReads {
	return &largeReads{store: st, budget: b, m: map[largeKey]*largeRead{}}
}

// get returns the entry head announced (a head of a read with a byte
// budget), read whole, and release, to call once it is written. The first
// stream that asks reads it, once the budget has room; the others wait for
// that read. A read that failed because its reader went away is tried
// again by the others.
func (l *largeReads) get(ctx context.Context, session string, head store.Entry) (store.Entry, func(), error) {
	key := largeKey{session, head.Seq}
	for {
		l.mu.Lock()
		r, ok := l.m[key]
		if !ok {
			r = &largeRead{done: make(chan struct{}), free: func() {}}
			l.m[key] = r
		}
		r.refs++
		l.mu.Unlock()
		if !ok {
			l.read(ctx, key, head, r)
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			l.release(key, r)
			return store.Entry{}, nil, ctx.Err()
		}
		if r.err == nil {
			return r.entry, func() { l.release(key, r) }, nil
		}
		l.release(key, r)
		if ctx.Err() != nil || !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) {
			return store.Entry{}, nil, r.err
		}
	}
}

// read reads the entry of key into r, within the budget, and wakes the
// streams that wait for it. A failed read leaves the map at once, so that
// the next stream reads again.
func (l *largeReads) read(ctx context.Context, key largeKey, head store.Entry, r *largeRead) {
	defer close(r.done)
	free, err := l.budget.acquire(ctx, head.Size)
	if err == nil {
		var entries []store.Entry
		entries, err = l.store.ReadLogRaw(ctx, key.session, key.seq-1, 1, head.Size)
		switch {
		case err != nil:
		case len(entries) == 0 || entries[0].Seq != key.seq:
			err = errEntryGone
		case entries[0].Head():
			err = fmt.Errorf("read event %d of session %s: larger than the %d bytes it had", key.seq, key.session, head.Size)
		default:
			r.entry = entries[0]
		}
		if err != nil {
			free()
		} else {
			r.free = free
		}
	}
	if err != nil {
		r.err = err
		l.mu.Lock()
		if l.m[key] == r {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

// release drops a stream's hold on r; the last one gives its memory and
// budget back.
func (l *largeReads) release(key largeKey, r *largeRead) {
	l.mu.Lock()
	r.refs--
	last := r.refs == 0
	if last && l.m[key] == r {
		delete(l.m, key)
	}
	l.mu.Unlock()
	if last {
		r.free()
	}
}
