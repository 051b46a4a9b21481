package memories

import (
	"context"
	"log/slog"
	"time"

	"github.com/reinsdev/reins/internal/service"
)

// Retention of memory versions.
const (
	// DefaultRetention is how long a memory's older versions are kept
	// (a memory's latest version is kept as long as the memory's store).
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultPruneInterval is how often the pruner looks for versions
	// past their retention.
	DefaultPruneInterval = time.Hour
	// pruneBatch bounds the versions one transaction deletes, so that a
	// large backlog never holds the database's writers long.
	pruneBatch = 1000
)

// versionPruner deletes old memory versions (the store).
type versionPruner interface {
	PruneMemoryVersions(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Pruner deletes, every Interval, the memory versions older than
// Retention that are not their memory's latest. It is a service.Service.
type Pruner struct {
	Store     versionPruner
	Retention time.Duration // zero: DefaultRetention
	Interval  time.Duration // zero: DefaultPruneInterval
	Logger    *slog.Logger

	life service.Base
}

// Start prunes once now, then every Interval, until Stop.
func (p *Pruner) Start(ctx context.Context) error {
	if _, err := p.life.Begin(ctx); err != nil {
		return err
	}
	p.life.Go(p.run)
	return nil
}

// Stop ends the pruning and waits for it.
func (p *Pruner) Stop(ctx context.Context) error { return p.life.Halt(ctx) }

func (p *Pruner) run(ctx context.Context) {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultPruneInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.Prune(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Prune deletes the versions past their retention, in batches, and
// returns how many it deleted.
func (p *Pruner) Prune(ctx context.Context) int64 {
	retention := p.Retention
	if retention <= 0 {
		retention = DefaultRetention
	}
	before := time.Now().Add(-retention)
	var total int64
	for ctx.Err() == nil {
		n, err := p.Store.PruneMemoryVersions(ctx, before, pruneBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil && p.Logger != nil {
				p.Logger.Warn("prune memory versions", "err", err)
			}
			break
		}
		if n < pruneBatch {
			break
		}
	}
	if total > 0 && p.Logger != nil {
		p.Logger.Info("pruned memory versions past their retention", "versions", total, "retention", retention)
	}
	return total
}
