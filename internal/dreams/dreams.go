// Package dreams runs dreams: each one is a session of the built-in dream
// agent, in a cloud environment without network that reins keeps per
// workspace, with the dream's output memory store attached read_write
// and the transcripts of its input sessions placed as files. A Runner
// claims the active dreams in the store (every replica runs one; a claim
// keeps two from driving the same dream), starts each pending one (see
// start) and follows its session until the dream has ended and its
// session has stopped (see follow). What a start creates is planned in
// the dream's row beforehand, so a start cut off by a restart is resumed
// by the next claimant rather than repeated.
package dreams

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Defaults of Config.
const (
	DefaultClaimTTL    = 30 * time.Second
	DefaultPoll        = 2 * time.Second
	DefaultMaxDuration = time.Hour
	// DefaultStopGrace is how long an ended dream waits for its session
	// to stop before it stops counting as active.
	DefaultStopGrace = time.Minute
)

// Store is what a Runner reads and writes of the store; a store.Store is
// one.
type Store interface {
	store.Dreams
	GetMemoryStore(ctx context.Context, id string) (ma.MemoryStore, error)
	CreateMemoryStore(ctx context.Context, m ma.MemoryStore) error
	DeleteMemoryStore(ctx context.Context, id string) error
	ListMemories(ctx context.Context, storeID string, q store.MemoryQuery) ([]store.MemoryItem, error)
	CreateMemory(ctx context.Context, w store.MemoryWrite) (ma.Memory, error)
	GetSession(ctx context.Context, id string) (ma.Session, error)
	ListEvents(ctx context.Context, sessionID string, q store.EventQuery) ([]store.Entry, error)
	CreateFile(ctx context.Context, f store.File, content io.Reader) error
	ListFiles(ctx context.Context, q store.FileQuery) ([]store.Item[store.File], error)
	DeleteFile(ctx context.Context, id string) error
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
	CreateEnvironment(ctx context.Context, e ma.Environment) error
	UpdateEnvironment(ctx context.Context, id string, fn func(cur *ma.Environment) error) (ma.Environment, error)
}

// Sessions is the part of the sessions service a Runner uses;
// *sessions.Service is one.
type Sessions interface {
	Prepare(ctx context.Context, d sessions.Draft) (ma.Session, error)
	Create(ctx context.Context, sess ma.Session, initial []ma.Event, rec sessions.Record) (ma.Session, error)
	Send(ctx context.Context, id string, evs []ma.Event, rec sessions.Record) ([]ma.Event, error)
}

// Config configures a Runner. Store, Sessions and Bus are required.
type Config struct {
	Store    Store
	Sessions Sessions
	// Bus wakes the follower of a dream when its session changes.
	Bus *bus.Bus
	// Owner names this process in the dreams' claims (the replica's id;
	// "local" by default). A process restarted under the same name takes
	// its claims back at once.
	Owner string
	// ClaimTTL is how long a claim lasts unless renewed (renewed every
	// third of it); Poll how often a dream's session is read without a
	// wake-up; MaxDuration how long a dream's session may run before the
	// dream fails with a timeout; StopGrace how long an ended dream waits
	// for its session to stop. Zero: the defaults.
	ClaimTTL, Poll, MaxDuration, StopGrace time.Duration
	Logger                                 *slog.Logger
}

// Runner runs the dreams of the store: a service (Start, Stop).
type Runner struct {
	cfg  Config
	log  *slog.Logger
	life service.Base // owns the claim loop and the dreams' goroutines
	wake chan struct{}

	mu      sync.Mutex      // guards driving
	driving map[string]bool // the dreams a goroutine of this runner drives
}

// New returns a Runner.
func New(cfg Config) *Runner {
	cfg.Owner = cmp.Or(cfg.Owner, "local")
	cfg.ClaimTTL = cmp.Or(cfg.ClaimTTL, DefaultClaimTTL)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.MaxDuration = cmp.Or(cfg.MaxDuration, DefaultMaxDuration)
	cfg.StopGrace = cmp.Or(cfg.StopGrace, DefaultStopGrace)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), driving: map[string]bool{}}
}

// Start starts the claim loop: the dreams left active by a previous run
// are taken up at once.
func (r *Runner) Start(ctx context.Context) error {
	if _, err := r.life.Begin(ctx); err != nil {
		return err
	}
	r.life.Go(r.loop)
	return nil
}

// Stop ends the claim loop and the dreams' goroutines, and waits for
// them until ctx ends. The dreams stay as they are: their claims lapse,
// and the next runner (this one restarted, or another replica) takes
// them up.
func (r *Runner) Stop(ctx context.Context) error { return r.life.Halt(ctx) }

// Wake makes the runner claim dreams now (one was created).
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// loop claims dreams at start, on every wake-up and every third of the
// claim's lifetime (which renews the claims).
func (r *Runner) loop(ctx context.Context) {
	t := time.NewTicker(r.cfg.ClaimTTL / 3)
	defer t.Stop()
	for {
		r.claim(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
	}
}

// claim claims the active dreams and drives each one no goroutine of
// this runner drives yet.
func (r *Runner) claim(ctx context.Context) {
	ds, err := r.cfg.Store.ClaimDreams(ctx, r.cfg.Owner, r.cfg.ClaimTTL)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("dreams: cannot claim dreams", "err", err)
		}
		return
	}
	for _, d := range ds {
		r.mu.Lock()
		busy := r.driving[d.ID]
		r.driving[d.ID] = true
		r.mu.Unlock()
		if busy {
			continue
		}
		if !r.life.Go(func(ctx context.Context) { r.drive(ctx, d) }) {
			return
		}
	}
}

// drive starts the dream if it is pending, then follows it until it is
// no longer active, this runner lost its claim, or the runner stops.
func (r *Runner) drive(ctx context.Context, d store.Dream) {
	defer func() {
		r.mu.Lock()
		delete(r.driving, d.ID)
		r.mu.Unlock()
	}()
	ctx = store.WithWorkspace(ctx, d.WorkspaceID)
	var err error
	switch {
	case d.Status == ma.DreamPending:
		d, err = r.start(ctx, d)
	case d.SessionID == nil:
		d, err = r.settle(ctx, d)
	}
	if err != nil {
		r.startFailed(ctx, d, err)
		return
	}
	if d.Active {
		r.follow(ctx, d.ID, d.Plan.SessionID)
	}
}

// settle takes up a dream that ended before it recorded its session
// (canceled while it started, by a runner that stopped meanwhile): a
// session its start created is followed until it stops; without one,
// what the start made is removed.
func (r *Runner) settle(ctx context.Context, d store.Dream) (store.Dream, error) {
	_, err := r.cfg.Store.GetSession(ctx, d.Plan.SessionID)
	switch {
	case err == nil:
		return r.begun(ctx, d.ID)
	case errors.Is(err, store.ErrNotFound):
		return r.abandon(ctx, d)
	}
	return d, err
}

// errLost: another runner claims the dream now.
var errLost = errors.New("dreams: the dream's claim was lost")

// update changes the dream if this runner still claims it.
func (r *Runner) update(ctx context.Context, id string, fn func(d *store.Dream) error) (store.Dream, error) {
	return r.cfg.Store.UpdateDream(ctx, id, func(d *store.Dream) error {
		if d.Owner != r.cfg.Owner {
			return errLost
		}
		return fn(d)
	})
}
