// Package harness runs sessions. A runner owns each session that has work:
// it reads the session's log, projects it into a model transcript, calls the
// model, dispatches tools, appends events and applies the error policy. It
// keeps no state the log does not have, so a runner can die at any instant
// and a new one continues from the log. Idle sessions have no runner and
// cost no memory.
package harness

import (
	"context"
	"github.com/reinsdev/reins/internal/pricing"
	"log/slog"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// Store is what the harness reads of the store: the rows and logs of the
// sessions it runs. A store.Store is one. It writes them through its
// Writer.
type Store interface {
	GetSession(ctx context.Context, id string) (ma.Session, error)
	ReadLog(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error)
	SessionIDsByStatus(ctx context.Context, statuses ...string) ([]string, error)
	SessionIDsWithPending(ctx context.Context) ([]string, error)
	// GetThread returns a child thread of a session.
	GetThread(ctx context.Context, sessionID, threadID string) (ma.SessionThread, error)
}

// Writer is the harness's write path of a session (a
// *sessions.Writer): fn runs in one transaction on the session's row and
// log, and the session is returned as committed.
type Writer interface {
	Update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error)
}

// Config configures a Harness. Store, Writer, Bus and Model are required.
type Config struct {
	Store Store
	Bus   *bus.Bus
	Model model.Provider
	// Prices prices what sessions consume, for their usage's list cost
	// and budgets (nil prices nothing).
	Prices *pricing.Table
	// Writer writes the sessions the harness runs.
	Writer Writer
	// Tools runs built-in tools; nil answers every call with an error
	// result.
	Tools tool.Runner
	// WebFetch, if set, runs the web_fetch tool in this process; nil
	// answers its calls with an error result.
	WebFetch tool.Runner
	// Workers, if set, tells which sessions pull workers serve.
	Workers tool.WorkerHost
	// AgentEnds, if set, runs the turns of sessions whose metadata opts
	// in (AgentEndMetadataKey) on external agent ends.
	AgentEnds AgentEnds
	// MCP, if set, reaches the agents' remote MCP servers.
	MCP tool.MCPHost
	// Credentials, if set, checks the sessions' vault credentials before
	// each model call.
	Credentials CredentialChecker
	// Skills, if set, describes the skills of a session's agent at the
	// end of its system prompt (their bodies are read on demand).
	Skills SkillPrompter
	Retry  RetryPolicy
	// MaxTokens bounds each model response (0 = the provider's default).
	MaxTokens int
	// MaxToolRounds bounds the tool-use rounds of one turn (a model
	// response with tool uses and their execution): a turn that reaches
	// it ends with a tool_use_limit_reached_error (0: no limit).
	MaxToolRounds int
	// MaxCompactions bounds the compactions of a thread's context in a
	// row, without a model message or tool call between them: a turn that
	// needs one more ends with a compaction_limit_reached_error (0: no
	// limit).
	MaxCompactions int
	// ContextWindow returns a model's context window in tokens (0: the
	// default, 200,000; 128,000 for openai/*). When a request approaches
	// it, older turns are compacted into a summary.
	ContextWindow func(modelID string) int
	// IdleLinger is how long a runner stays after its session went idle,
	// keeping its in-memory view of the log warm for the next message
	// (default 30 s; negative = exit at once). After it, an idle session
	// costs no memory.
	IdleLinger time.Duration
	// Leases, if set, makes the harness run a session only while it holds
	// the session's lease as Owner (a name unique to this process): several
	// processes on one database then never run a session at once, and a
	// stale owner's writes are fenced off. The lease lasts LeaseTTL
	// (default 15 s), is renewed every third of it, and a sweep every half
	// of it takes over the sessions with work and no live lease. Without
	// Leases (one process per database, SQLite) every Wake runs, and the
	// sweep (every half of LeaseTTL all the same) wakes the sessions with
	// work and no runner.
	Leases   store.Leases
	Owner    string
	LeaseTTL time.Duration
	Logger   *slog.Logger
	// Outcomes configures the grader of outcomes.
	Outcomes OutcomeConfig
	// Observer, if set, is told of the turns, model calls, tool calls,
	// session errors and lease takeovers (metrics and traces).
	Observer Observer
}

// DefaultLeaseTTL is the lease of a session's runner when Config.LeaseTTL
// is not set.
const DefaultLeaseTTL = 15 * time.Second

// Harness schedules session runners.
type Harness struct {
	cfg      Config
	log      *slog.Logger
	obs      Observer
	previews *Previews

	ctx    context.Context    // the runners' and the sweep's; ends at Stop
	cancel context.CancelFunc // ends ctx
	wg     sync.WaitGroup     // the runners and the sweep
	// draining is closed when Stop starts draining (under leases):
	// runners finish the step in flight and hand their sessions over.
	draining  chan struct{}
	drainOnce sync.Once

	renewer *renewer // of the leases (nil without)

	mu      sync.Mutex // guards the fields below
	runners map[string]*runner
	turns   map[string]*ActiveTurn // agent-end turns running here, by session id
	closed  bool
}

// New returns a Harness. Call Start to resume interrupted work and Stop
// to stop.
func New(cfg Config) *Harness {
	if cfg.Tools == nil {
		cfg.Tools = noTools{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Retry = cfg.Retry.withDefaults()
	if cfg.IdleLinger == 0 {
		cfg.IdleLinger = 30 * time.Second
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	obs := cfg.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Harness{cfg: cfg, log: cfg.Logger, obs: obs, previews: newPreviews(), ctx: ctx, cancel: cancel, draining: make(chan struct{}),
		runners: make(map[string]*runner)}
	if cfg.Leases != nil {
		// Not in wg: the renewer keeps the runners' leases while Stop
		// waits for them to drain.
		h.renewer = newRenewer(h)
		go h.renewer.run()
	}
	return h
}

// Previews returns the preview fan-out that streams subscribe to.
func (h *Harness) Previews() *Previews { return h.previews }

// Start wakes every session that was left with work: running or
// rescheduling sessions, and sessions with queued input. Idle sessions
// without input get no runner. Under leases, only the sessions no other
// replica owns are woken (those a crashed process of the same Owner left
// are its own). Then the sweep starts (it ends at Stop).
func (h *Harness) Start(ctx context.Context) error {
	if err := h.wakeOrphans(ctx); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.wg.Go(h.sweep)
	}
	return nil
}

// wakeOrphans wakes the sessions with work that have no runner here:
// under leases, those no other replica owns.
func (h *Harness) wakeOrphans(ctx context.Context) error {
	if h.cfg.Leases != nil {
		return h.wakeUnowned(ctx, h.cfg.Owner)
	}
	active, err := h.cfg.Store.SessionIDsByStatus(ctx, ma.StatusRunning, ma.StatusRescheduling)
	if err != nil {
		return err
	}
	queued, err := h.cfg.Store.SessionIDsWithPending(ctx)
	if err != nil {
		return err
	}
	h.wakeIdle(append(active, queued...))
	return nil
}

// wakeIdle wakes the sessions of ids that have no runner here.
func (h *Harness) wakeIdle(ids []string) {
	for _, id := range ids {
		h.mu.Lock()
		_, running := h.runners[id]
		h.mu.Unlock()
		if !running {
			h.Wake(id)
		}
	}
}

// Wake makes sure a runner looks at the session soon. Under leases, the
// runner it starts first acquires the session's lease and leaves at once
// when another replica holds it.
func (h *Harness) Wake(sessionID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if r := h.runners[sessionID]; r != nil {
		r.signal()
		return
	}
	r := &runner{h: h, id: sessionID, wake: make(chan struct{}, 1), ended: make(chan struct{})}
	h.runners[sessionID] = r
	h.wg.Go(r.run)
}

// Interrupt stops the current model call, tool call or retry wait of the
// session's thread threadID at once: "" (or the primary's id) names the
// primary thread, whose interrupt stops every thread's; a child's stops
// that child's alone. The user.interrupt event must already be in the
// log: the runner ends the turn when it reads it.
func (h *Harness) Interrupt(sessionID, threadID string) {
	h.mu.Lock()
	r := h.runners[sessionID]
	h.mu.Unlock()
	switch {
	case r == nil:
	case threadID == "" || threadID == ma.PrimaryThreadID(sessionID):
		r.interrupt()
	default:
		r.interruptChild(threadID)
	}
	h.Wake(sessionID)
}

// End makes the runner of an archived or deleted session leave now
// instead of lingering, so that what it holds (its executor slot and
// sandbox, its MCP connections) is released at once.
func (h *Harness) End(sessionID string) {
	h.mu.Lock()
	r := h.runners[sessionID]
	h.mu.Unlock()
	if r != nil {
		r.endOnce.Do(func() { close(r.ended) })
	}
}

// Stop stops every runner and waits for them (and for the sweep and the
// leases' renewer) until ctx is done. It may be called more than once.
//
// Under leases it drains first: no runner starts another step; each
// finishes the step in flight (a model call, a tool call), records it,
// releases its session's lease and, when the session still has work,
// tells the other replicas (a bus.Wake note), one of which continues the
// session at once instead of at its next sweep. Waits (a retry backoff, a
// placement, an idle linger) end at once. The drain lasts at most half the
// time left to ctx's deadline (maxDrain without one); then, and without
// leases at once, the steps still in flight are abandoned at a safe point
// (between transactions): a model call is redone by the session's next
// runner, a tool call is answered "may or may not have run".
func (h *Harness) Stop(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	if h.cfg.Leases != nil {
		h.drainOnce.Do(func() {
			h.mu.Lock()
			n := len(h.runners)
			h.mu.Unlock()
			h.log.Info("draining: runners finish their step and hand their sessions over", "runners", n)
			close(h.draining)
		})
		dctx, cancel := drainContext(ctx)
		defer cancel()
		select {
		case <-done:
		case <-dctx.Done():
		}
	}
	h.cancel()
	if h.renewer != nil {
		<-h.renewer.stopped // it stops at once: its calls use h.ctx
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// maxDrain bounds the drain of a Stop whose context has no deadline.
const maxDrain = 5 * time.Second

// drainContext returns the context of a drain: it ends halfway to ctx's
// deadline, leaving the other half to the abandoned steps and to what
// shuts down after the harness.
func drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := maxDrain
	if deadline, ok := ctx.Deadline(); ok {
		d = time.Until(deadline) / 2
	}
	return context.WithTimeout(ctx, d)
}

// isDraining reports whether Stop is draining the runners.
func (h *Harness) isDraining() bool {
	select {
	case <-h.draining:
		return true
	default:
		return false
	}
}

// exit removes r unless a wake-up is pending; it reports whether r may stop.
func (h *Harness) exit(r *runner) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-r.wake:
		return false
	default:
	}
	delete(h.runners, r.id)
	return true
}

// remove removes r whatever wake-ups are pending.
func (h *Harness) remove(r *runner) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.runners, r.id)
}

func (h *Harness) now() string { return ma.Time(time.Now()) }
