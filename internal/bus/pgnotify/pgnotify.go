// Package pgnotify relays the wake-ups of a bus between the processes
// (replicas) that share one PostgreSQL database, with LISTEN/NOTIFY.
//
// Sending never blocks the publisher: notes wait in a set (the same note
// twice is sent once) that one goroutine flushes in a single statement. One
// dedicated connection listens; when it breaks, it reconnects with backoff
// and reports the reconnect, because the notes sent meanwhile are lost: the
// receiver then reads again what they could have concerned. A lost note
// delays work, it never loses it.
//
// Beside the notes, a relay carries data: ordered messages per key (a
// session's previews), on a channel of their own. Data waits in a bounded
// queue per key and is packed into as few notifications as fit; what
// exceeds the queue is dropped, never waited for, and data sent while a
// receiver is away is lost to it.
package pgnotify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinsdev/reins/backoff"
	"github.com/reinsdev/reins/internal/bus"
)

// DefaultChannel is the channel notes go through.
const DefaultChannel = "reins_wakeups"

// closeTimeout bounds the closing of the listening connection.
const closeTimeout = 2 * time.Second

// dataSuffix names the data's channel after the notes' one.
const dataSuffix = "_data"

// Bounds of the data.
const (
	// MaxData is the largest message SendData takes: a notification's
	// payload is less than 8,000 bytes, and its header (origin, number,
	// key) takes up to 2*maxName+22 of them.
	MaxData = 7500
	// maxPayload is PostgreSQL's bound on a payload, less one.
	maxPayload = 7999
	// maxName bounds the origin and the keys of data.
	maxName = 200
	// maxQueued bounds the data waiting for one key, maxQueuedTotal all
	// of it: beyond, SendData drops.
	maxQueued      = 256 << 10
	maxQueuedTotal = 8 << 20
	// dropLogEvery paces the warnings about dropped data.
	dropLogEvery = 10 * time.Second
)

// Config configures a Relay. DSN and Origin are required.
type Config struct {
	// DSN is the database's (a PostgreSQL URL or keyword/value string).
	DSN string
	// Origin names this process among those on the database (no spaces);
	// the relay ignores its own notes.
	Origin string
	// Channel is the NOTIFY channel (default DefaultChannel).
	Channel string
	// Backoff paces the reconnects of the listener (default 100 ms up to
	// 5 s).
	Backoff backoff.Policy
	// DataWindow is the least time between two flushes that carry only
	// data (default 20 ms; negative: none): the data of a key that comes
	// meanwhile goes in one notification. Notes never wait for it.
	DataWindow time.Duration
	Logger     *slog.Logger
}

// Handler receives what other processes sent.
type Handler struct {
	// Receive gets each note of another process, on the listener's
	// goroutine.
	Receive func(bus.Note)
	// Reconnected is called after the listener reconnected (notes sent
	// while it was away are lost), and after a note it could not read (a
	// process of another version sent it, during a rolling upgrade), at
	// most once per unreadableCatchUp: the receiver catches up on what
	// the notes it missed were about.
	Reconnected func()
	// Data gets the messages another process sent for key, in the order
	// they were sent (several at once when they were packed together), on
	// the listener's goroutine.
	Data func(key string, msgs [][]byte)
	// Lag, if set, gets the delay of each note of another process: from
	// its Send there to its arrival here, by the two processes' clocks.
	Lag func(time.Duration)
}

// Relay is a bus.Relay over PostgreSQL's LISTEN/NOTIFY.
type Relay struct {
	cfg  Config
	log  *slog.Logger
	pool *pgxpool.Pool // for sending

	kick chan struct{} // wakes the sending goroutine when something is pending

	mu        sync.Mutex         // guards the fields below
	pending   map[bus.Note]int64 // note → its first Send (Unix µs)
	data      map[string]*queue  // data waiting, by key
	dataBytes int                // the bytes in data
	dropped   int                // messages dropped since the last warning
	droppedAt time.Time          // the last warning about them
	seq       uint64             // numbers the data payloads

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ bus.Relay = (*Relay)(nil)

// queue is the data waiting for one key.
type queue struct {
	msgs  [][]byte
	bytes int
}

// Open returns a Relay on the database; nothing is sent or received before
// Start. Close releases it.
func Open(ctx context.Context, cfg Config) (*Relay, error) {
	if cfg.Origin == "" || len(cfg.Origin) > maxName || strings.ContainsAny(cfg.Origin, " \t\n") {
		return nil, fmt.Errorf("pgnotify: origin %q: want a name without spaces, at most %d bytes", cfg.Origin, maxName)
	}
	if cfg.Channel == "" {
		cfg.Channel = DefaultChannel
	}
	if cfg.DataWindow == 0 {
		cfg.DataWindow = 20 * time.Millisecond
	}
	if cfg.Backoff.Base <= 0 {
		cfg.Backoff = backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: %w", err)
	}
	pc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: %w", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	return &Relay{cfg: cfg, log: cfg.Logger, pool: pool, pending: make(map[bus.Note]int64), data: make(map[string]*queue), kick: make(chan struct{}, 1), ctx: rctx, cancel: cancel}, nil
}

// Start listens (the first LISTEN happens before Start returns, so no note
// sent after it is missed) and starts sending. The goroutines stop on
// Close.
func (r *Relay) Start(ctx context.Context, h Handler) error {
	conn, err := r.listen(ctx)
	if err != nil {
		return err
	}
	r.wg.Go(func() { r.receive(conn, h) })
	r.wg.Go(r.send)
	return nil
}

// Close stops the relay and closes its connections. The notes sent
// before it are flushed first (for at most sendTimeout): a replica that
// shuts down tells the others about the sessions it handed over.
func (r *Relay) Close() {
	r.cancel()
	r.wg.Wait()
	r.pool.Close()
}

// Send implements bus.Relay: n is sent soon, after the notes before it.
func (r *Relay) Send(n bus.Note) {
	now := time.Now().UnixMicro()
	r.mu.Lock()
	if _, ok := r.pending[n]; !ok {
		r.pending[n] = now
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// SendData queues msg for the other processes, after the messages sent
// for key before it. It never blocks: it reports false, dropping msg,
// when msg or key is too large (more than MaxData bytes, or a key of
// more than 200), msg holds a newline or key's queue is full (the
// database is slower than the data comes).
func (r *Relay) SendData(key string, msg []byte) bool {
	if len(msg) > MaxData || len(key) > maxName || bytes.IndexByte(msg, '\n') >= 0 || strings.IndexByte(key, '\n') >= 0 {
		return false
	}
	r.mu.Lock()
	q := r.data[key]
	if q == nil {
		q = &queue{}
		r.data[key] = q
	}
	ok := q.bytes+len(msg) <= maxQueued && r.dataBytes+len(msg) <= maxQueuedTotal
	if ok {
		q.msgs = append(q.msgs, msg)
		q.bytes += len(msg)
		r.dataBytes += len(msg)
	} else {
		r.dropped++
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return ok
}

// listen opens the listening connection.
func (r *Relay) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, r.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: connect: %w", err)
	}
	listen := "LISTEN " + pgx.Identifier{r.cfg.Channel}.Sanitize() + "; LISTEN " + pgx.Identifier{r.cfg.Channel + dataSuffix}.Sanitize()
	if _, err := conn.Exec(ctx, listen); err != nil {
		r.closeConn(conn)
		return nil, fmt.Errorf("pgnotify: listen: %w", err)
	}
	return conn, nil
}

func (r *Relay) closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	conn.Close(ctx)
}

// receive hands the notes that arrive on conn to h until Close,
// reconnecting when the connection breaks.
func (r *Relay) receive(conn *pgx.Conn, h Handler) {
	defer func() {
		if conn != nil {
			r.closeConn(conn)
		}
	}()
	attempt := 0
	var lastUnreadable time.Time // the last catch-up for a note not read
	for {
		if conn == nil {
			attempt++
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(r.cfg.Backoff.Delay(attempt)):
			}
			var err error
			if conn, err = r.listen(r.ctx); err != nil {
				r.log.Warn("wake-up listener: reconnect", "attempt", attempt, "err", err)
				continue
			}
			r.log.Info("wake-up listener reconnected", "attempts", attempt)
			attempt = 0
			if h.Reconnected != nil {
				h.Reconnected()
			}
		}
		n, err := conn.WaitForNotification(r.ctx)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.log.Warn("wake-up listener: connection lost; reconnecting", "err", err)
			r.closeConn(conn)
			conn = nil
			continue
		}
		if n.Channel == r.cfg.Channel+dataSuffix {
			if key, msgs, origin, ok := decodeData(n.Payload); ok && origin != r.cfg.Origin && h.Data != nil {
				h.Data(key, msgs)
			}
			continue
		}
		note, origin, sent, ok := decode(n.Payload)
		if !ok {
			lastUnreadable = r.unreadable(n.Payload, lastUnreadable, h.Reconnected)
			continue
		}
		if origin == r.cfg.Origin || (note.To != "" && note.To != r.cfg.Origin) {
			continue
		}
		if h.Lag != nil {
			h.Lag(time.Since(time.UnixMicro(sent)))
		}
		if h.Receive != nil {
			h.Receive(note)
		}
	}
}

// unreadableCatchUp is the least time between two catch-ups for notes the
// listener could not read.
const unreadableCatchUp = time.Second

// unreadable handles a note the listener could not read: unless it caught
// up for one less than unreadableCatchUp ago (last), it logs the note and
// calls catchUp. It returns the time of the last catch-up.
func (r *Relay) unreadable(payload string, last time.Time, catchUp func()) time.Time {
	if time.Since(last) < unreadableCatchUp {
		return last
	}
	r.log.Warn("wake-up listener: a note this version cannot read (from a replica of another version?); catching up", "note", truncate(payload, 80))
	if catchUp != nil {
		catchUp()
	}
	return time.Now()
}

// truncate returns s cut to n bytes at most.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// send flushes the pending notes and data, in one statement each time,
// until Close, and then once more.
func (r *Relay) send() {
	failing := false
	var lastData time.Time // the last flush that carried data
	for {
		closing := false
		select {
		case <-r.ctx.Done():
			closing = true
		case <-r.kick:
		}
		if !closing && !r.waitForData(lastData) {
			closing = true
		}
		carriedData, err := r.flush()
		if carriedData {
			lastData = time.Now()
		}
		if err == nil {
			failing = false
		} else if !failing {
			// Logged once a streak: the sweeps and the streams' polls
			// make up for the lost notes.
			failing = true
			r.log.Warn("send wake-ups to other replicas", "err", err)
		}
		if closing {
			return
		}
	}
}

// waitForData waits, while only data is pending, until DataWindow after
// the last flush of data. It reports false when the relay closed.
func (r *Relay) waitForData(last time.Time) bool {
	for {
		wait := r.cfg.DataWindow - time.Since(last)
		r.mu.Lock()
		notes := len(r.pending)
		r.mu.Unlock()
		if wait <= 0 || notes > 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return false
		case <-r.kick: // a note, maybe
		case <-t.C:
		}
		t.Stop()
	}
}

// sendTimeout bounds one flush of the pending notes.
const sendTimeout = 2 * time.Second

// flush sends the pending notes and data in one statement; it reports
// whether they carried data.
func (r *Relay) flush() (carriedData bool, err error) {
	channels, batch := r.take()
	if len(batch) == 0 {
		return false, nil
	}
	carriedData = slices.Contains(channels, r.cfg.Channel+dataSuffix)
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	// The notifications of one transaction arrive in order, and those of
	// successive transactions in commit order.
	_, err = r.pool.Exec(ctx, `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(c, p, i) ORDER BY i`, channels, batch)
	if err != nil {
		return carriedData, fmt.Errorf("%d notifications: %w", len(batch), err)
	}
	return carriedData, nil
}

// take empties the pending notes and data into notifications: their
// channels and payloads.
func (r *Relay) take() (channels, payloads []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, sent := range r.pending {
		channels = append(channels, r.cfg.Channel)
		payloads = append(payloads, encode(n, r.cfg.Origin, sent))
	}
	clear(r.pending)
	for key, q := range r.data {
		for _, p := range r.pack(key, q.msgs) {
			channels = append(channels, r.cfg.Channel+dataSuffix)
			payloads = append(payloads, p)
		}
	}
	clear(r.data)
	r.dataBytes = 0
	if r.dropped > 0 && time.Since(r.droppedAt) >= dropLogEvery {
		r.log.Warn("data for other replicas dropped: the database is slower than it comes", "messages", r.dropped)
		r.dropped, r.droppedAt = 0, time.Now()
	}
	return channels, payloads
}

// pack writes key's messages into as few payloads as fit, each
// "origin number key" and a line per message. The number makes each
// payload unique: PostgreSQL merges identical notifications of a
// transaction.
func (r *Relay) pack(key string, msgs [][]byte) []string {
	var out []string
	var b strings.Builder
	for _, m := range msgs {
		if b.Len() > 0 && b.Len()+1+len(m) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			r.seq++
			b.WriteString(r.cfg.Origin + " " + strconv.FormatUint(r.seq, 10) + " " + key)
		}
		b.WriteByte('\n')
		b.Write(m)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// decodeData reads what pack wrote; ok is false for anything else.
func decodeData(payload string) (key string, msgs [][]byte, origin string, ok bool) {
	lines := strings.Split(payload, "\n")
	head := strings.SplitN(lines[0], " ", 3)
	if len(head) != 3 || head[2] == "" || len(lines) < 2 {
		return "", nil, "", false
	}
	msgs = make([][]byte, len(lines)-1)
	for i, l := range lines[1:] {
		msgs[i] = []byte(l)
	}
	return head[2], msgs, head[0], true
}

// kindCodes are the kinds as they travel.
var kindCodes = [...]string{bus.Changed: "c", bus.Wake: "w", bus.Interrupt: "i", bus.End: "e", bus.Watch: "v"}

// encode writes a note as "kind sent origin key", where kind is followed
// by "#thread" for a note that names a thread and by "@to" for a note to
// one process; sent is the time of its first Send in Unix microseconds (for
// the receiver's lag figure).
func encode(n bus.Note, origin string, sent int64) string {
	kind := kindCodes[n.Kind]
	if n.Thread != "" {
		kind += "#" + n.Thread
	}
	if n.To != "" {
		kind += "@" + n.To
	}
	return kind + " " + strconv.FormatInt(sent, 10) + " " + origin + " " + n.Key
}

// decode reads what encode wrote; ok is false for anything else.
func decode(payload string) (n bus.Note, origin string, sent int64, ok bool) {
	parts := strings.SplitN(payload, " ", 4)
	if len(parts) != 4 || parts[3] == "" {
		return n, "", 0, false
	}
	kind, to, targeted := strings.Cut(parts[0], "@")
	kind, thread, named := strings.Cut(kind, "#")
	if targeted && to == "" || named && thread == "" {
		return n, "", 0, false
	}
	sent, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return n, "", 0, false
	}
	for k, code := range kindCodes {
		if code == kind {
			return bus.Note{Key: parts[3], Kind: bus.Kind(k), To: to, Thread: thread}, parts[2], sent, true
		}
	}
	return n, "", 0, false
}
