package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/bus/pgnotify"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/toolhost"
	ma "github.com/reinsdev/reins/managedagents"
)

// replicaName returns a name for this process among the replicas of a
// database: the host's name, the process id and a random suffix.
func replicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "reins"
	}
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", strings.ReplaceAll(host, " ", "_"), os.Getpid(), hex.EncodeToString(b[:]))
}

// openRelay opens the wake-up relay of a PostgreSQL database and attaches
// it to b.
func openRelay(ctx context.Context, dsn, replica string, b *bus.Bus, log *slog.Logger) (*pgnotify.Relay, error) {
	r, err := pgnotify.Open(ctx, pgnotify.Config{DSN: dsn, Origin: replica, Logger: log})
	if err != nil {
		return nil, err
	}
	b.SetRelay(r)
	return r, nil
}

// replicaRelay carries wake-ups and previews between the replicas of a
// PostgreSQL database. It is a service: Start starts receiving the other
// replicas' wake-ups, Stop closes the relay (after flushing the wake-ups
// sent) and waits for what its notes started.
type replicaRelay struct {
	relay    *pgnotify.Relay
	previews *previewRelay
	bus      *bus.Bus
	h        *harness.Harness
	tools    *toolhost.Host
	lag      func(time.Duration) // the relay's report of a wake-up's delay; nil: none
	log      *slog.Logger

	life      service.Base // owns the previews' relay and what the notes start
	closeOnce sync.Once    // of the relay
}

// Start starts receiving the other replicas' wake-ups: each wakes the
// local streams, a session's wake-up or interrupt reaches the harness
// (which runs the session if it gets its lease), and a session's end makes
// its runner here leave and frees what this replica holds of it. A watch
// makes this replica relay the session's previews, and the previews other
// replicas relay reach the streams here. After a reconnect the harness
// catches up on what the lost wake-ups may have concerned.
func (r *replicaRelay) Start(ctx context.Context) error {
	life, err := r.life.Begin(ctx)
	if err != nil {
		return err
	}
	err = r.relay.Start(ctx, pgnotify.Handler{
		Receive: r.receive,
		Reconnected: func() {
			if err := r.h.CatchUp(life); err != nil {
				r.log.Warn("catch up after the wake-up listener reconnected", "err", err)
			}
		},
		Data: r.previews.receive,
		Lag:  r.lag,
	})
	if err != nil {
		return err
	}
	r.life.Go(r.previews.run)
	return nil
}

// receive handles a note from another replica.
func (r *replicaRelay) receive(n bus.Note) {
	if n.Kind == bus.Watch {
		r.previews.watchedBy(n.Key)
		return
	}
	r.bus.Deliver(n.Key)
	switch n.Kind {
	case bus.Wake:
		r.h.Wake(n.Key)
	case bus.Interrupt:
		r.h.Interrupt(n.Key, n.Thread)
	case bus.End:
		r.h.End(n.Key)
		r.life.Go(func(ctx context.Context) { r.tools.EndedElsewhere(ctx, n.Key) })
	}
}

// Stop ends what the notes started and waits for it until ctx ends, then
// closes the relay, which sends the wake-ups not yet sent. It may be
// called more than once, and before Start (it closes the relay opened).
func (r *replicaRelay) Stop(ctx context.Context) error {
	err := r.life.Halt(ctx)
	r.closeOnce.Do(r.relay.Close)
	return err
}

// replicaLifecycle is the tools' lifecycle as the API drives it: a
// session's end also goes to the other replicas, so that its runner leaves
// at once wherever it runs.
type replicaLifecycle struct {
	httpapi.Lifecycle
	b *bus.Bus
}

// SessionEnded implements httpapi.Lifecycle.
func (l replicaLifecycle) SessionEnded(ctx context.Context, sess *ma.Session, deleted bool) {
	l.Lifecycle.SessionEnded(ctx, sess, deleted)
	l.b.Tell(bus.Note{Key: sess.ID, Kind: bus.End})
}

// replicaRunner is the harness as the API drives it: a wake-up or an
// interrupt also goes to the other replicas, one of which may own the
// session.
type replicaRunner struct {
	h *harness.Harness
	b *bus.Bus
}

// Wake implements sessions.Runner.
func (r replicaRunner) Wake(sessionID string) {
	r.h.Wake(sessionID)
	r.b.Tell(bus.Note{Key: sessionID, Kind: bus.Wake})
}

// Interrupt implements sessions.Runner.
func (r replicaRunner) Interrupt(sessionID, threadID string) {
	r.h.Interrupt(sessionID, threadID)
	r.b.Tell(bus.Note{Key: sessionID, Kind: bus.Interrupt, Thread: threadID})
}
