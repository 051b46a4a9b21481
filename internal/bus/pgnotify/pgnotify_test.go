package pgnotify

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is a relay and what it received.
type node struct {
	r           *Relay
	got         chan bus.Note
	lags        chan time.Duration
	reconnected chan struct{}
}

func start(t *testing.T, dsn, origin string) *node {
	t.Helper()
	ctx := context.Background()
	r, err := Open(ctx, Config{DSN: dsn, Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{r: r, got: make(chan bus.Note, 100), lags: make(chan time.Duration, 100), reconnected: make(chan struct{}, 10)}
	if err := r.Start(ctx, Handler{
		Receive:     func(note bus.Note) { n.got <- note },
		Reconnected: func() { n.reconnected <- struct{}{} },
		Lag:         func(d time.Duration) { n.lags <- d },
	}); err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return n
}

func (n *node) expect(t *testing.T, want bus.Note) {
	t.Helper()
	select {
	case got := <-n.got:
		if got != want {
			t.Fatalf("got note %+v, want %+v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("note %+v never arrived", want)
	}
}

func (n *node) expectNothing(t *testing.T) {
	t.Helper()
	select {
	case got := <-n.got:
		t.Fatalf("unexpected note %+v", got)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestRelay sends notes between two processes' relays: each kind arrives
// at the other one, not back at the sender.
func TestRelay(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	a := start(t, dsn, "a")
	b := start(t, dsn, "b")
	for _, n := range []bus.Note{{Key: "sesn_1", Kind: bus.Changed}, {Key: "sesn_1", Kind: bus.Wake}, {Key: "sesn 2", Kind: bus.Interrupt}} {
		a.r.Send(n)
		b.expect(t, n)
	}
	a.expectNothing(t)
	b.r.Send(bus.Note{Key: "queue:env_1"})
	a.expect(t, bus.Note{Key: "queue:env_1"})
}

// TestRelayLag: each note received reports its delay since its Send on
// the other process, and a note sent twice before its flush counts from
// the first Send.
func TestRelayLag(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	a := start(t, dsn, "a")
	b := start(t, dsn, "b")
	n := bus.Note{Key: "sesn_1", Kind: bus.Wake}
	a.r.Send(n)
	b.expect(t, n)
	if lag := <-b.lags; lag < 0 || lag > 5*time.Second {
		t.Fatalf("lag %s, want within [0, 5s]", lag)
	}
	// A note queued 300 ms ago (as if the sender had been slow to
	// flush) and queued again now keeps its first time.
	a.r.mu.Lock()
	a.r.pending[n] = time.Now().Add(-300 * time.Millisecond).UnixMicro()
	a.r.mu.Unlock()
	a.r.Send(n)
	b.expect(t, n)
	if lag := <-b.lags; lag < 300*time.Millisecond || lag > 5*time.Second {
		t.Fatalf("lag %s, want at least the 300 ms the note waited", lag)
	}
	if len(a.lags) != 0 {
		t.Fatalf("the sender reported lags of its own notes")
	}
}

// TestRelayReconnects cuts the listening connection: the relay reconnects,
// reports it (notes may have been lost), and receives again.
func TestRelayReconnects(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	a := start(t, dsn, "a")
	b := start(t, dsn, "b")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`).Scan(&killed); err != nil || killed != 2 {
		t.Fatalf("terminated %d listeners: %v", killed, err)
	}
	select {
	case <-b.reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("no reconnect")
	}
	<-a.reconnected
	a.r.Send(bus.Note{Key: "sesn_1", Kind: bus.Wake})
	b.expect(t, bus.Note{Key: "sesn_1", Kind: bus.Wake})
}

func TestDecode(t *testing.T) {
	for _, p := range []string{"", "w", "w a", "w a ", "x a k", "w 1 a", "w 1 a ", "x 1 a k", "w a k", "w x a k"} {
		if _, _, _, ok := decode(p); ok {
			t.Errorf("decode(%q) accepted", p)
		}
	}
	n, origin, sent, ok := decode(encode(bus.Note{Key: "k 1", Kind: bus.Interrupt}, "o", 1234567))
	if !ok || origin != "o" || sent != 1234567 || n != (bus.Note{Key: "k 1", Kind: bus.Interrupt}) {
		t.Fatalf("round trip = %+v %q %d %v", n, origin, sent, ok)
	}
}
