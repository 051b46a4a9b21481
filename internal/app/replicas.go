package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/bus/pgnotify"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
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

// startRelay starts receiving the other replicas' wake-ups: each wakes the
// local streams, a session's wake-up or interrupt reaches the harness
// (which runs the session if it gets its lease), and a session's end makes
// its runner here leave and frees what this replica holds of it. A watch
// makes this replica relay the session's previews, and the previews other
// replicas relay reach the streams here. After a reconnect the harness
// catches up on what the lost wake-ups may have concerned.
func (a *App) startRelay(ctx context.Context) error {
	if a.relay == nil {
		return nil
	}
	err := a.relay.Start(ctx, pgnotify.Handler{
		Receive: func(n bus.Note) {
			if n.Kind == bus.Watch {
				a.previews.watchedBy(n.Key)
				return
			}
			a.Bus.Deliver(n.Key)
			switch n.Kind {
			case bus.Wake:
				a.Harness.Wake(n.Key)
			case bus.Interrupt:
				a.Harness.Interrupt(n.Key)
			case bus.End:
				a.Harness.End(n.Key)
				a.relayWG.Go(func() { a.tools.EndedElsewhere(a.relayCtx, n.Key) })
			}
		},
		Reconnected: func() {
			if err := a.Harness.CatchUp(a.relayCtx); err != nil {
				a.log.Warn("catch up after the wake-up listener reconnected", "err", err)
			}
		},
		Data: a.previews.receive,
		Lag:  a.notifyLag(),
	})
	if err != nil {
		return err
	}
	a.relayWG.Go(func() { a.previews.run(a.relayCtx) })
	return nil
}

// stopRelay stops the relay and waits for what its notes started.
func (a *App) stopRelay() {
	a.relayCancel()
	if a.relay != nil {
		a.relay.Close()
	}
	a.relayWG.Wait()
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
func (r replicaRunner) Interrupt(sessionID string) {
	r.h.Interrupt(sessionID)
	r.b.Tell(bus.Note{Key: sessionID, Kind: bus.Interrupt})
}
