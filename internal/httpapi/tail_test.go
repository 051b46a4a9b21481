package httpapi

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// logStore serves the logs tails read. LastSeq of a session in slow, and
// ReadLogRaw when hang is set, signal blocked and block until their
// context ends. Other methods are not used.
type logStore struct {
	store.Store
	slow    map[string]bool
	hang    bool
	blocked chan struct{}
	entries []store.Entry
}

func (s *logStore) LastSeq(ctx context.Context, id string) (int64, error) {
	if s.slow[id] {
		s.blocked <- struct{}{}
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return 0, nil
}

// ReadLogRaw has no byte budget.
func (s *logStore) ReadLogRaw(ctx context.Context, _ string, after int64, limit int, _ int64) ([]store.Entry, error) {
	if s.hang {
		s.blocked <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var out []store.Entry
	for _, e := range s.entries {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *logStore) GetSession(context.Context, string) (ma.Session, error) {
	return ma.Session{}, nil
}

// TestSubscribeDoesNotWaitForOtherSessions opens a stream on one session
// while the store is slow to answer for another.
func TestSubscribeDoesNotWaitForOtherSessions(t *testing.T) {
	st := &logStore{slow: map[string]bool{"sesn_slow": true}, blocked: make(chan struct{})}
	ts := newTails(st, bus.New(), time.Hour)
	defer ts.close()
	slowCtx, cancel := context.WithCancel(t.Context())
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		ts.subscribe(slowCtx, "sesn_slow")
	}()
	defer func() { cancel(); <-slowDone }()
	<-st.blocked // the slow subscribe is in the store

	fast := make(chan error, 1)
	go func() {
		_, _, release, err := ts.subscribe(t.Context(), "sesn_fast")
		if err == nil {
			release()
		}
		fast <- err
	}()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscribe to one session waited for the store read of another")
	}
}

// TestShutdownWaitsForTails shuts the server down while a tail's reader is
// in a store read that only ends with its context.
func TestShutdownWaitsForTails(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	st := &logStore{hang: true, blocked: make(chan struct{})}
	b := bus.New()
	s := New(Config{Store: st, Bus: b, PollInterval: time.Hour})
	_, _, release, err := s.tails.subscribe(t.Context(), "sesn_1")
	if err != nil {
		t.Fatal(err)
	}
	b.Publish("sesn_1") // the reader starts a read that hangs
	<-st.blocked
	s.Stop(context.Background())
	goleak.VerifyNone(t, ignore) // before release, which would stop the reader
	release()
}

// TestTailRingBoundedByBytes feeds a tail events whose JSON together
// exceeds tailRingBytes.
func TestTailRingBoundedByBytes(t *testing.T) {
	const big = 3 << 20
	f := newLogFixture(t)
	ts := newTails(f.store, bus.New(), time.Hour)
	defer ts.close()
	tl, _, release, err := ts.subscribe(t.Context(), f.session)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	f.append(t, big, big, big, big)
	tl.read(t.Context())

	tl.mu.Lock()
	n, size := len(tl.ring.entries), tl.ring.bytes
	tl.mu.Unlock()
	if size > tailRingBytes || n != tailRingBytes/big {
		t.Fatalf("ring holds %d entries of %d bytes, want %d entries within %d bytes", n, size, tailRingBytes/big, tailRingBytes)
	}
	if _, _, ok := tl.since(0); ok {
		t.Fatal("since(0) served from the ring after its first entries were dropped")
	}
	if got, _, ok := tl.since(2); !ok || len(got) != 2 || got[0].Seq != 3 {
		t.Fatalf("since(2) = %d entries, ok %v; want entries 3 and 4 from the ring", len(got), ok)
	}
	if f.store.maxRead() > tailRingBytes {
		t.Fatalf("the tail read %d bytes of events at once, more than its ring's %d", f.store.maxRead(), tailRingBytes)
	}
}

// TestTailNeverReadsEventsLargerThanItsRing appends an event larger than
// the ring between small ones: the tail skips it (streams read it from the
// store) without ever reading it.
func TestTailNeverReadsEventsLargerThanItsRing(t *testing.T) {
	f := newLogFixture(t)
	ts := newTails(f.store, bus.New(), time.Hour)
	defer ts.close()
	tl, _, release, err := ts.subscribe(t.Context(), f.session)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	f.append(t, 100, tailRingBytes+1, 100)
	tl.read(t.Context())
	if f.store.maxRead() > tailRingBytes {
		t.Fatalf("the tail read %d bytes of events at once, more than its ring's %d", f.store.maxRead(), tailRingBytes)
	}
	if _, _, ok := tl.since(1); ok {
		t.Fatal("since(1) served from the ring, which cannot hold event 2")
	}
	if got, _, ok := tl.since(2); !ok || len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("since(2) = %d entries, ok %v; want entry 3 from the ring", len(got), ok)
	}
}

// TestSinceSurvivesTheRingDroppingEntries takes entries from the ring, as
// a stream does before writing them, then makes the ring drop them: the
// stream's entries are intact (the ring clears what it drops).
func TestSinceSurvivesTheRingDroppingEntries(t *testing.T) {
	tl := &tail{seq: 2}
	tl.ring.entries = make([]store.Entry, 0, 8) // room: the push below does not reallocate
	tl.ring.push(store.Entry{Seq: 1, Raw: []byte(`{"n":1}`)}, store.Entry{Seq: 2, Raw: []byte(`{"n":2}`)})
	got, _, ok := tl.since(0)
	if !ok || len(got) != 2 {
		t.Fatalf("since(0) = %d entries, ok %v", len(got), ok)
	}
	tl.mu.Lock()
	tl.ring.push(store.Entry{Seq: 3, Raw: make([]byte, tailRingBytes)}) // drops 1 and 2
	tl.seq = 3
	tl.mu.Unlock()
	if got[0].Seq != 1 || string(got[1].Raw) != `{"n":2}` {
		t.Fatalf("the stream's entries changed under it: seqs %d and %d, %q", got[0].Seq, got[1].Seq, got[1].Raw)
	}
}
