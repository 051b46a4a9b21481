// Package pgnotify relays the wake-ups of a bus between the processes
// (replicas) that share one PostgreSQL database, with LISTEN/NOTIFY.
//
// Sending never blocks the publisher: notes wait in a set (the same note
// twice is sent once) that one goroutine flushes in a single statement. One
// dedicated connection listens; when it breaks, it reconnects with backoff
// and reports the reconnect, because the notes sent meanwhile are lost: the
// receiver then reads again what they could have concerned. A lost note
// delays work, it never loses it.
package pgnotify

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinsdev/reins/internal/backoff"
	"github.com/reinsdev/reins/internal/bus"
)

// DefaultChannel is the channel notes go through.
const DefaultChannel = "reins_wakeups"

// closeTimeout bounds the closing of the listening connection.
const closeTimeout = 2 * time.Second

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
	Logger  *slog.Logger
}

// Handler receives what other processes sent.
type Handler struct {
	// Receive gets each note of another process, on the listener's
	// goroutine.
	Receive func(bus.Note)
	// Reconnected is called after the listener reconnected: notes sent
	// while it was away are lost.
	Reconnected func()
}

// Relay is a bus.Relay over PostgreSQL's LISTEN/NOTIFY.
type Relay struct {
	cfg  Config
	log  *slog.Logger
	pool *pgxpool.Pool // for sending

	mu      sync.Mutex
	pending map[bus.Note]struct{}
	kick    chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ bus.Relay = (*Relay)(nil)

// Open returns a Relay on the database; nothing is sent or received before
// Start. Close releases it.
func Open(ctx context.Context, cfg Config) (*Relay, error) {
	if cfg.Origin == "" || strings.ContainsAny(cfg.Origin, " \t\n") {
		return nil, fmt.Errorf("pgnotify: origin %q: want a name without spaces", cfg.Origin)
	}
	if cfg.Channel == "" {
		cfg.Channel = DefaultChannel
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
	return &Relay{cfg: cfg, log: cfg.Logger, pool: pool, pending: make(map[bus.Note]struct{}), kick: make(chan struct{}, 1), ctx: rctx, cancel: cancel}, nil
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
	r.mu.Lock()
	r.pending[n] = struct{}{}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// listen opens the listening connection.
func (r *Relay) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, r.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgnotify: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.cfg.Channel}.Sanitize()); err != nil {
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
		if note, origin, ok := decode(n.Payload); ok && origin != r.cfg.Origin && h.Receive != nil {
			h.Receive(note)
		}
	}
}

// send flushes the pending notes, in one statement each time, until Close,
// and then once more.
func (r *Relay) send() {
	failing := false
	for {
		closing := false
		select {
		case <-r.ctx.Done():
			closing = true
		case <-r.kick:
		}
		if err := r.flush(); err == nil {
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

// sendTimeout bounds one flush of the pending notes.
const sendTimeout = 2 * time.Second

// flush sends the pending notes in one statement.
func (r *Relay) flush() error {
	r.mu.Lock()
	batch := make([]string, 0, len(r.pending))
	for n := range r.pending {
		batch = append(batch, encode(n, r.cfg.Origin))
	}
	clear(r.pending)
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if _, err := r.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, r.cfg.Channel, batch); err != nil {
		return fmt.Errorf("%d notes: %w", len(batch), err)
	}
	return nil
}

// kindCodes are the kinds as they travel.
var kindCodes = [...]string{bus.Changed: "c", bus.Wake: "w", bus.Interrupt: "i"}

// encode writes a note as "kind origin key".
func encode(n bus.Note, origin string) string {
	return kindCodes[n.Kind] + " " + origin + " " + n.Key
}

// decode reads what encode wrote; ok is false for anything else.
func decode(payload string) (n bus.Note, origin string, ok bool) {
	parts := strings.SplitN(payload, " ", 3)
	if len(parts) != 3 || parts[2] == "" {
		return n, "", false
	}
	for k, code := range kindCodes {
		if code == parts[0] {
			return bus.Note{Key: parts[2], Kind: bus.Kind(k)}, parts[1], true
		}
	}
	return n, "", false
}
