package deployments

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/store"
)

// Defaults of Config.
const (
	// DefaultGrace is how late a scheduled instant may still be fired:
	// after downtime, the latest instant missed is fired once if it is
	// at most this old; older ones are skipped.
	DefaultGrace = 10 * time.Minute
	// DefaultPoll is how often the scheduler reads the deployments
	// without a wake-up (a deployment changed on another replica).
	DefaultPoll = 30 * time.Second
	// DefaultJitter bounds the per-deployment delay of each fire.
	DefaultJitter = 3 * time.Second
	// DefaultStale is how old a run still without its session or error
	// is when the scheduler records it abandoned (Runs.AbandonStale):
	// creating a session takes well under a second.
	DefaultStale = 2 * time.Minute
)

// Config configures a Scheduler. Runs is required.
type Config struct {
	Runs *Runs
	// Now is the scheduler's clock (time.Now by default).
	Now func() time.Time
	// Grace, Poll, Jitter and Stale: see the defaults; zero for them.
	Grace, Poll, Jitter, Stale time.Duration
	Logger                     *slog.Logger
}

// Scheduler fires the schedules of deployments: a service (Start, Stop).
// Every replica runs one; the store's unique (deployment, scheduled_at)
// makes one of them record each instant.
type Scheduler struct {
	cfg  Config
	log  *slog.Logger
	life service.Base
	wake chan struct{}
}

// NewScheduler returns a Scheduler.
func NewScheduler(cfg Config) *Scheduler {
	cfg.Grace = cmp.Or(cfg.Grace, DefaultGrace)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.Jitter = cmp.Or(cfg.Jitter, DefaultJitter)
	cfg.Stale = cmp.Or(cfg.Stale, DefaultStale)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1)}
}

// Start starts the scheduler's loop.
func (s *Scheduler) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return err
	}
	s.life.Go(s.loop)
	return nil
}

// Stop ends the loop and waits for it until ctx ends.
func (s *Scheduler) Stop(ctx context.Context) error { return s.life.Halt(ctx) }

// Now is the time by the scheduler's clock, the one schedules are read
// with.
func (s *Scheduler) Now() time.Time { return s.cfg.Now() }

// Wake makes the scheduler read the deployments now (one changed).
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop fires what is due, then sleeps until the next instant due, a
// wake-up or the poll interval.
func (s *Scheduler) loop(ctx context.Context) {
	for {
		wait := s.cfg.Poll
		if next, ok := s.Tick(ctx); ok {
			wait = min(wait, max(next.Sub(s.cfg.Now()), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.wake:
			t.Stop()
		}
	}
}

// Tick records the runs abandoned by a stopped server (at start, and
// those of another replica later), fires every scheduled deployment that
// is due now and returns the next instant one is due (ok false when none
// is).
func (s *Scheduler) Tick(ctx context.Context) (next time.Time, ok bool) {
	s.abandon(ctx)
	ds, err := s.cfg.Runs.Store.ScheduledDeployments(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("deployments: cannot read the scheduled deployments", "err", err)
		}
		return next, false
	}
	for _, d := range ds {
		due, fire, ok2 := s.plan(d)
		if !ok2 {
			continue
		}
		if fire {
			s.fire(ctx, d, due)
			continue
		}
		if !ok || due.Before(next) {
			next, ok = due, true
		}
	}
	return next, ok
}

// plan returns, for d, the instant to fire now (fire true: the latest
// instant of its schedule past, after sinceOf(d) and within the grace,
// once its jitter has passed) or the time the next one is due.
func (s *Scheduler) plan(d store.Deployment) (at time.Time, fire, ok bool) {
	sched, err := ParseSchedule(d.Schedule.Expression, d.Schedule.Timezone)
	if err != nil {
		s.log.Warn("deployments: bad schedule", "deployment", d.ID, "err", err)
		return at, false, false
	}
	now := s.cfg.Now()
	from := sinceOf(d)
	if edge := now.Add(-s.cfg.Grace); edge.After(from) {
		from = edge
	}
	jitter := s.jitter(d.ID)
	var latest time.Time
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		latest = t
	}
	if !latest.IsZero() {
		if !now.Before(latest.Add(jitter)) {
			return latest, true, true
		}
		return latest.Add(jitter), false, true
	}
	t := sched.Next(now)
	if t.IsZero() {
		return at, false, false
	}
	return t.Add(jitter), false, true
}

// abandon records the runs left pending by a stopped server. Runs are
// created at real time, so their age is read with time.Now, not the
// scheduler's clock.
func (s *Scheduler) abandon(ctx context.Context) {
	runs, err := s.cfg.Runs.AbandonStale(ctx, time.Now().Add(-s.cfg.Stale))
	if err != nil && ctx.Err() == nil {
		s.log.Warn("deployments: cannot record the abandoned runs", "err", err)
	}
	for _, r := range runs {
		s.log.Warn("deployments: a run's server stopped before its session was created", "deployment", r.DeploymentID, "run", r.ID)
	}
}

// fire runs d's instant at; another replica having fired it is not an
// error.
func (s *Scheduler) fire(ctx context.Context, d store.Deployment, at time.Time) {
	run, err := s.cfg.Runs.Scheduled(ctx, d, at)
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, errStale):
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("deployments: scheduled run failed", "deployment", d.ID, "scheduled_at", at, "err", err)
		}
	case run.Error != nil:
		s.log.Info("deployments: scheduled run created no session", "deployment", d.ID, "run", run.ID, "error", run.Error.Type)
	default:
		s.log.Info("deployments: scheduled run", "deployment", d.ID, "run", run.ID, "session", *run.SessionID)
	}
}

// jitter is d's delay after each instant: up to Config.Jitter, fixed
// per deployment (derived from its id), so that deployments with the
// same schedule do not all fire in the same millisecond.
func (s *Scheduler) jitter(id string) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(id))
	return time.Duration(h.Sum32()%uint32(s.cfg.Jitter/time.Millisecond)) * time.Millisecond
}
