package pgnotify

import (
	"context"
	"fmt"
	"strings"
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
	data        chan dataBatch
}

// dataBatch is what one data notification carried.
type dataBatch struct {
	key  string
	msgs []string
}

func start(t *testing.T, dsn, origin string) *node {
	t.Helper()
	ctx := context.Background()
	r, err := Open(ctx, Config{DSN: dsn, Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{r: r, got: make(chan bus.Note, 100), lags: make(chan time.Duration, 100), reconnected: make(chan struct{}, 10), data: make(chan dataBatch, 10000)}
	if err := r.Start(ctx, Handler{
		Receive:     func(note bus.Note) { n.got <- note },
		Reconnected: func() { n.reconnected <- struct{}{} },
		Lag:         func(d time.Duration) { n.lags <- d },
		Data: func(key string, msgs [][]byte) {
			b := dataBatch{key: key}
			for _, m := range msgs {
				b.msgs = append(b.msgs, string(m))
			}
			n.data <- b
		},
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
	for _, n := range []bus.Note{{Key: "sesn_1", Kind: bus.Changed}, {Key: "sesn_1", Kind: bus.Wake}, {Key: "sesn 2", Kind: bus.Interrupt},
		{Key: "sesn_1", Kind: bus.End}, {Key: "sesn_1", Kind: bus.Watch}} {
		a.r.Send(n)
		b.expect(t, n)
	}
	a.expectNothing(t)
	b.r.Send(bus.Note{Key: "queue:env_1"})
	a.expect(t, bus.Note{Key: "queue:env_1"})
}

// TestRelayTargetedNote sends a note to one process: only that one gets
// it.
func TestRelayTargetedNote(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	a := start(t, dsn, "a")
	b := start(t, dsn, "b")
	c := start(t, dsn, "c")
	n := bus.Note{Key: "sesn_1", Kind: bus.Wake, To: "c"}
	a.r.Send(n)
	c.expect(t, n)
	b.expectNothing(t)
}

// TestRelayFlushesOnClose closes a relay right after a Send: the note
// still reaches the other process (a replica that shuts down tells the
// others about the sessions it handed over).
func TestRelayFlushesOnClose(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	b := start(t, dsn, "b")
	for i := range 20 {
		r, err := Open(context.Background(), Config{DSN: dsn, Origin: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background(), Handler{}); err != nil {
			r.Close()
			t.Fatal(err)
		}
		n := bus.Note{Key: fmt.Sprintf("sesn_%d", i), Kind: bus.Wake}
		r.Send(n)
		r.Close()
		b.expect(t, n)
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

// TestRelayUnreadableNoteCatchesUp sends a note this version cannot read,
// as a replica of a newer one would during a rolling upgrade: the
// receiver catches up (what the note was about is not lost), once for a
// burst of them, and still receives the notes it can read.
func TestRelayUnreadableNoteCatchesUp(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	b := start(t, dsn, "b")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := range 3 {
		if _, err := conn.Exec(ctx, `SELECT pg_notify($1, $2)`, DefaultChannel, fmt.Sprintf("z9 %d newer sesn_1", i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-b.reconnected:
	case <-time.After(5 * time.Second):
		t.Fatal("no catch-up after an unreadable note")
	}
	select {
	case <-b.reconnected:
		t.Fatal("a catch-up per unreadable note of a burst")
	case <-time.After(200 * time.Millisecond):
	}
	a := start(t, dsn, "a")
	a.r.Send(bus.Note{Key: "sesn_1", Kind: bus.Wake})
	b.expect(t, bus.Note{Key: "sesn_1", Kind: bus.Wake})
}

func TestDecode(t *testing.T) {
	for _, p := range []string{"", "w", "w a", "w a ", "x a k", "w 1 a", "w 1 a ", "x 1 a k", "w a k", "w x a k", "w@ 1 a k", "x@b 1 a k", "i# 1 a k", "i#@b 1 a k"} {
		if _, _, _, ok := decode(p); ok {
			t.Errorf("decode(%q) accepted", p)
		}
	}
	n, origin, sent, ok := decode(encode(bus.Note{Key: "k 1", Kind: bus.Interrupt}, "o", 1234567))
	if !ok || origin != "o" || sent != 1234567 || n != (bus.Note{Key: "k 1", Kind: bus.Interrupt}) {
		t.Fatalf("round trip = %+v %q %d %v", n, origin, sent, ok)
	}
	to := bus.Note{Key: "sesn_1", Kind: bus.Wake, To: "replica@host"}
	if n, origin, _, ok := decode(encode(to, "o", 1)); !ok || origin != "o" || n != to {
		t.Fatalf("round trip of a targeted note = %+v %q %v", n, origin, ok)
	}
	for _, th := range []bus.Note{{Key: "sesn_1", Kind: bus.Interrupt, Thread: "sthr_2"}, {Key: "sesn_1", Kind: bus.Interrupt, Thread: "sthr_2", To: "replica@host"}} {
		if n, _, _, ok := decode(encode(th, "o", 1)); !ok || n != th {
			t.Fatalf("round trip of a note naming a thread = %+v %v, want %+v", n, ok, th)
		}
	}
}

// TestRelayData sends a burst of messages for two keys: each arrives once,
// in order, at the other relay only, packed into few notifications; the
// largest message passes and what is too large is refused.
func TestRelayData(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	a := start(t, dsn, "a")
	b := start(t, dsn, "b")
	const n = 2000
	keys := []string{"sesn_1", "sesn 2"}
	began := time.Now()
	for i := range n {
		for _, k := range keys {
			if !a.r.SendData(k, fmt.Appendf(nil, `{"n":%d,"text":"some words of a model's answer"}`, i)) {
				t.Fatalf("message %d of %s refused", i, k)
			}
		}
	}
	big := strings.Repeat("x", MaxData)
	if !a.r.SendData("sesn_1", []byte(big)) {
		t.Fatal("a message of MaxData bytes refused")
	}
	for _, bad := range []string{big + "x", "two\nlines"} {
		if a.r.SendData("sesn_1", []byte(bad)) {
			t.Fatalf("message of %d bytes accepted", len(bad))
		}
	}
	next := map[string]int{}
	notifications := 0
	for next["sesn_1"] <= n || next["sesn 2"] < n {
		select {
		case got := <-b.data:
			notifications++
			for _, m := range got.msgs {
				i := next[got.key]
				want := fmt.Sprintf(`{"n":%d,"text":"some words of a model's answer"}`, i)
				if i == n {
					want = big
				}
				if m != want {
					t.Fatalf("%s: message %d is %.60q", got.key, i, m)
				}
				next[got.key]++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("got %v of %d messages", next, n)
		}
	}
	t.Logf("%d messages in %d notifications, %v", 2*n+1, notifications, time.Since(began))
	if notifications > n/10 {
		t.Fatalf("%d messages took %d notifications", 2*n+1, notifications)
	}
	select {
	case got := <-a.data:
		t.Fatalf("data came back to its sender: %+v", got)
	case got := <-b.data:
		t.Fatalf("more data: %+v", got)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestRelayDataPaced sends messages one at a time, as a model streams its
// answer: the data window packs several into a notification, in order,
// and notes still pass.
func TestRelayDataPaced(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	a := start(t, dsn, "a")
	b := start(t, dsn, "b")
	const n, pace = 100, 5 * time.Millisecond
	began := time.Now()
	for i := range n {
		a.r.SendData("sesn_1", fmt.Appendf(nil, "%d", i))
		time.Sleep(pace)
	}
	a.r.Send(bus.Note{Key: "sesn_1", Kind: bus.Wake})
	b.expect(t, bus.Note{Key: "sesn_1", Kind: bus.Wake})
	got, notifications := 0, 0
	for got < n {
		select {
		case d := <-b.data:
			notifications++
			for _, m := range d.msgs {
				if m != fmt.Sprint(got) {
					t.Fatalf("message %d is %q", got, m)
				}
				got++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d of %d messages", got, n)
		}
	}
	t.Logf("%d messages, one every %v, in %d notifications over %v", n, pace, notifications, time.Since(began))
	if notifications > n/2 {
		t.Fatalf("%d messages took %d notifications", n, notifications)
	}
}

// TestSendDataBounded: a key's queue is bounded while nothing flushes it
// (a relay that was never started), and the bound drops, never blocks.
func TestSendDataBounded(t *testing.T) {
	r, err := Open(context.Background(), Config{DSN: "postgres://127.0.0.1:1/none", Origin: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	msg := []byte(strings.Repeat("x", 1000))
	sent := 0
	for range 1000 {
		if r.SendData("k", msg) {
			sent++
		}
	}
	if sent != maxQueued/len(msg) {
		t.Fatalf("%d messages of 1000 bytes queued, want %d", sent, maxQueued/len(msg))
	}
	if !r.SendData("other", msg) {
		t.Fatal("another key's message refused")
	}
}

func TestDecodeData(t *testing.T) {
	for _, p := range []string{"", "a 1 k", "a 1\nx", "a\nx"} {
		if _, _, _, ok := decodeData(p); ok {
			t.Errorf("decodeData(%q) accepted", p)
		}
	}
	r := &Relay{cfg: Config{Origin: "o"}}
	ps := r.pack("k 1", [][]byte{[]byte("m1"), []byte(strings.Repeat("y", MaxData)), []byte("m3" + strings.Repeat("z", 1000))})
	if len(ps) != 2 {
		t.Fatalf("packed into %d payloads", len(ps))
	}
	var got []string
	for _, p := range ps {
		if len(p) > maxPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		key, msgs, origin, ok := decodeData(p)
		if !ok || key != "k 1" || origin != "o" {
			t.Fatalf("decodeData = %q %q %v", key, origin, ok)
		}
		for _, m := range msgs {
			got = append(got, string(m[:2]))
		}
	}
	if strings.Join(got, ",") != "m1,yy,m3" {
		t.Fatalf("round trip %v", got)
	}
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
