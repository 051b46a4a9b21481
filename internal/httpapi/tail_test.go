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
	s.Shutdown()
	goleak.VerifyNone(t, ignore) // before release, which would stop the reader
	release()
}

// TestTailRingBoundedByBytes feeds a tail events whose JSON together
// exceeds tailRingBytes.
func TestTailRingBoundedByBytes(t *testing.T) {
	const big = 3 << 20
	st := &logStore{}
	for seq := range int64(4) {
		st.entries = append(st.entries, store.Entry{Seq: seq + 1, Raw: make([]byte, big)})
	}
	ts := newTails(st, bus.New(), time.Hour)
	defer ts.close()
	tl, _, release, err := ts.subscribe(t.Context(), "sesn_1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	tl.read(t.Context())

	tl.mu.Lock()
	n, size := len(tl.ring), tl.ringBytes
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
}
