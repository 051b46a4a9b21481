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
// local streams, and a session's wake-up or interrupt reaches the harness
// (which runs the session if it gets its lease). After a reconnect the
// harness catches up on what the lost wake-ups may have concerned.
func (a *App) startRelay(ctx context.Context) error {
	if a.relay == nil {
		return nil
	}
	return a.relay.Start(ctx, pgnotify.Handler{
		Receive: func(n bus.Note) {
			a.Bus.Deliver(n.Key)
			switch n.Kind {
			case bus.Wake:
				a.Harness.Wake(n.Key)
			case bus.Interrupt:
				a.Harness.Interrupt(n.Key)
			}
		},
		Reconnected: func() {
			if err := a.Harness.CatchUp(a.relayCtx); err != nil {
				a.log.Warn("catch up after the wake-up listener reconnected", "err", err)
			}
		},
		Lag: a.notifyLag(),
	})
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
