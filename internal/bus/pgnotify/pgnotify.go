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
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	// Lag, if set, gets the delay of each note of another process: from
	// its Send there to its arrival here, by the two processes' clocks.
	Lag func(time.Duration)
}

// Relay is a bus.Relay over PostgreSQL's LISTEN/NOTIFY.
type Relay struct {
	cfg  Config
	log  *slog.Logger
	pool *pgxpool.Pool // for sending

	mu      sync.Mutex
	pending map[bus.Note]int64 // note → its first Send (Unix µs)
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
	return &Relay{cfg: cfg, log: cfg.Logger, pool: pool, pending: make(map[bus.Note]int64), kick: make(chan struct{}, 1), ctx: rctx, cancel: cancel}, nil
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

// Close stops the relay (notes not yet sent are dropped) and closes its
// connections.
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
		note, origin, sent, ok := decode(n.Payload)
		if !ok || origin == r.cfg.Origin {
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

// send flushes the pending notes, in one statement each time, until Close.
func (r *Relay) send() {
	failing := false
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
		}
		r.mu.Lock()
		batch := make([]string, 0, len(r.pending))
		for n, sent := range r.pending {
			batch = append(batch, encode(n, r.cfg.Origin, sent))
		}
		clear(r.pending)
		r.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		_, err := r.pool.Exec(r.ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, r.cfg.Channel, batch)
		switch {
		case err == nil:
			failing = false
		case errors.Is(err, context.Canceled) && r.ctx.Err() != nil:
			return
		case !failing:
			// Logged once a streak: the sweeps and the streams' polls
			// make up for the lost notes.
			failing = true
			r.log.Warn("send wake-ups to other replicas", "notes", len(batch), "err", err)
		}
	}
}

// kindCodes are the kinds as they travel.
var kindCodes = [...]string{bus.Changed: "c", bus.Wake: "w", bus.Interrupt: "i"}

// encode writes a note as "kind sent origin key", sent being the time of
// its first Send in Unix microseconds (for the receiver's lag figure).
func encode(n bus.Note, origin string, sent int64) string {
	return kindCodes[n.Kind] + " " + strconv.FormatInt(sent, 10) + " " + origin + " " + n.Key
}

// decode reads what encode wrote; ok is false for anything else
// (including the notes of a version without the send time: replicas of
// one database run one version).
func decode(payload string) (n bus.Note, origin string, sent int64, ok bool) {
	parts := strings.SplitN(payload, " ", 4)
	if len(parts) != 4 || parts[3] == "" {
		return n, "", 0, false
	}
	sent, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return n, "", 0, false
	}
	for k, code := range kindCodes {
		if code == parts[0] {
			return bus.Note{Key: parts[3], Kind: bus.Kind(k)}, parts[2], sent, true
		}
	}
	return n, "", 0, false
}
