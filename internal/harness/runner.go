package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reinsdev/reins/backoff"
	"github.com/reinsdev/reins/internal/awaiting"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// runner drives one session until it has nothing to do.
type runner struct {
	h    *Harness
	id   string
	wake chan struct{}
	// ended is closed when the session was archived or deleted: the
	// runner leaves instead of lingering.
	ended   chan struct{}
	endOnce sync.Once

	sess       *ma.Session // the session row as of the last read or write
	log        *logCache   // the session's log, read incrementally
	proj       *projector  // the view of the log, fed incrementally
	projClient bool        // the client mode proj was built with

	settled bool // tool uses left running by an earlier runner were answered

	// kept holds the results of tools that ran but whose recording failed
	// while the database was unavailable, by tool use id: the next
	// attempt records them instead of running the tools again.
	kept map[string]tool.Result

	// sent is what the agent end of the session's last turn keeps of its
	// transcript (nil: the next turn.start carries it whole).
	sent *sentTranscript

	turn *turnObs // the observation of the turn in progress, if any
	obs  txObs    // what the current transaction leaves to report

	// th is set on the runner of a child thread (see threads.go); kids on
	// the session runner of a multi-agent session (set under mu).
	th       *thread
	kids     *threadSet
	txStatus string // a child's status as its last transaction left it

	mu         sync.Mutex         // guards the fields below
	gen        uint64             // incremented by each interrupt
	cancelTurn context.CancelFunc // cancels the current model/tool call or wait
}

func (r *runner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *runner) interrupt() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	if r.cancelTurn != nil {
		r.cancelTurn()
	}
	r.interruptChildren()
}

// turnContext returns a context cancelled by the next interrupt, or an
// already cancelled one when an interrupt arrived since gen was read.
func (r *runner) turnContext(ctx context.Context, gen uint64) (context.Context, func()) {
	tctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	if r.gen != gen {
		cancel()
	}
	r.cancelTurn = cancel
	r.mu.Unlock()
	return tctx, func() {
		r.mu.Lock()
		r.cancelTurn = nil
		r.mu.Unlock()
		cancel()
	}
}

func (r *runner) generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

func (r *runner) run() {
	ctx, leave, ok := r.h.own(r)
	if !ok {
		r.h.remove(r)
		return
	}
	var handOver func() bool // set when the runner stops with work left
	defer func() {
		if handOver == nil && r.h.isDraining() {
			// A lingering runner ended by the drain: input may have
			// come meanwhile, its wake-up ignored (Wake is closed).
			handOver = r.hasWork
		}
		leave(handOver)
	}()
	failures, outages := 0, 0
	for {
		if r.h.isDraining() {
			// Shutting down under leases, between two steps: another
			// replica continues the session if it has work.
			handOver = r.hasWork
			r.release()
			r.h.remove(r)
			return
		}
		more, err := r.safeStep(ctx)
		switch {
		case errors.Is(err, store.ErrFenced) && ctx.Err() == nil:
			r.h.log.Warn("session write refused by the fence: another replica took the session over; its runner stops", "session", r.id)
			r.release()
			r.h.remove(r)
			return
		case ctx.Err() != nil, errors.Is(err, store.ErrFenced):
			// Shutting down (a step cut off: the session still has
			// work), or the lease is lost: its new owner gets the
			// wake-ups.
			handOver = func() bool { return true }
			r.release()
			r.h.remove(r)
			return
		case errors.Is(err, store.ErrNotFound):
			// Deleted: leave below.
		case errors.Is(err, store.ErrUnavailable):
			// The database is away: a delay, not a failure of the turn.
			outages++
			r.waitForStore(ctx, outages, err)
			continue
		case err != nil:
			failures++
			if r.fail(ctx, failures, err) {
				continue
			}
		case more:
			failures, outages = 0, 0
			continue
		default:
			failures, outages = 0, 0
			r.idled(ctx)
			if r.linger(ctx) {
				continue
			}
		}
		r.release()
		if r.h.exit(r) {
			return
		}
		// A wake-up came meanwhile: go on like a new runner would.
		failures = 0
	}
}

// hasWork reports whether the session still has work (a turn under way,
// queued input) as its runner leaves after its lease was released. It
// reads the log once more: input queued before this read is seen, input
// queued after it finds the lease free and wakes the other replicas
// itself. When in doubt it reports true.
func (r *runner) hasWork() bool {
	if r.sess == nil || r.log == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.h.ctx), releaseTimeout)
	defer cancel()
	if _, err := r.log.refresh(ctx, r.h.cfg.Store, r.id); err != nil {
		return true
	}
	switch r.sess.Status {
	case ma.StatusRunning, ma.StatusRescheduling:
		return true
	case ma.StatusTerminated:
		return false
	}
	interrupt, input := r.log.queued()
	return interrupt || input
}

// fail handles the nth consecutive failed step: it records it per the
// unknown_error policy and waits out a backoff. It reports whether the
// runner should try again; false means it should leave.
func (r *runner) fail(ctx context.Context, n int, err error) bool {
	r.h.log.Error("session runner step failed", "session", r.id, "attempt", n, "err", err)
	r.log, r.proj, r.sess = nil, nil, nil // retry from the log
	r.sent = nil
	if !r.internalFailure(ctx, n) {
		return false
	}
	select {
	case <-ctx.Done():
	case <-r.h.draining:
	case <-time.After(time.Duration(n) * time.Second):
	}
	return true
}

// storeBackoff paces a runner's attempts while the database is
// unavailable: it continues at most 2 s after the database is back.
var storeBackoff = backoff.Policy{Base: 100 * time.Millisecond, Max: 2 * time.Second}

// waitForStore handles the nth consecutive step that failed because the
// database was unavailable (store.ErrUnavailable: a lost connection, a
// restart, a disk full): nothing is recorded (nothing could be) and the
// turn's failures are not counted; the runner waits a backoff and
// continues from the log. What it knows the log does not (the result of a
// tool that ran, see kept) it keeps. Under leases, an outage longer than
// the lease ends the runner (its context), and the session is taken again
// once the database is back.
func (r *runner) waitForStore(ctx context.Context, n int, err error) {
	if n == 1 || n%20 == 0 {
		r.h.log.Warn("database unavailable; the session's runner waits and continues from its log", "session", r.id, "attempt", n, "err", err)
	}
	r.log, r.proj, r.sess = nil, nil, nil // the next step reads the log again
	r.sent = nil
	t := time.NewTimer(storeBackoff.Delay(n))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-r.h.draining:
	case <-r.ended:
	}
}

// keep remembers the result of a tool whose recording failed with err, if
// the database was unavailable, for the next attempt to record.
func (r *runner) keep(toolUseID string, res tool.Result, err error) {
	if !errors.Is(err, store.ErrUnavailable) {
		return
	}
	if r.kept == nil {
		r.kept = make(map[string]tool.Result)
	}
	r.kept[toolUseID] = res
}

// takeKept returns and forgets the kept result of a tool use.
func (r *runner) takeKept(toolUseID string) (tool.Result, bool) {
	res, ok := r.kept[toolUseID]
	delete(r.kept, toolUseID)
	return res, ok
}

// release frees the session's placement before the runner leaves (a new
// runner places the session again when it needs its tools).
func (r *runner) release() {
	r.stopChildren()
	r.endTurn(OutcomeSuspended)
	if p, ok := r.h.cfg.Tools.(tool.Placer); ok {
		p.Release(r.id)
	}
	if r.h.cfg.MCP != nil {
		r.h.cfg.MCP.Release(r.id)
	}
}

// idled hands over what an idle session holds while its runner lingers:
// its executor's slot (to be placed again at the next turn) and its queued
// work item. A session that waits for a pull worker is not idle here.
func (r *runner) idled(ctx context.Context) {
	if r.sess == nil || r.sess.Status != ma.StatusIdle || r.proj == nil || r.proj.view().awaitsClient() {
		return
	}
	if p, ok := r.h.cfg.Tools.(tool.Placer); ok {
		p.Idle(r.id)
	}
	if w := r.h.cfg.Workers; w != nil {
		if err := w.SessionIdle(ctx, r.sess); err != nil {
			r.h.log.Warn("retire an idle session's work", "session", r.id, "err", err)
		}
	}
}

// linger waits up to IdleLinger for a wake-up; it reports whether one came.
func (r *runner) linger(ctx context.Context) bool {
	d := r.h.cfg.IdleLinger
	if r.waitsForThreads() {
		d = 24 * time.Hour // a child's write wakes it
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.wake:
		return true
	case <-t.C:
	case <-r.ended:
	case <-ctx.Done():
	case <-r.h.draining:
	}
	return false
}

// internalFailure applies the unknown_error policy of the error model: the
// first failure is retried from the log (retrying), the second ends the turn
// (exhausted), a third means the session cannot continue (terminal). It
// reports whether the runner should keep going.
func (r *runner) internalFailure(ctx context.Context, n int) bool {
	// The cause stays in the log (fail logged it): what a store or a
	// driver says is for the operator, not for the session's clients.
	f := failure{errType: ma.ErrorUnknown, message: "internal error in the server (its log has the cause)"}
	s, err := r.h.cfg.Writer.Update(ctx, r.id, r.guard(r.observed(r.inThread(func(tx store.Tx) error {
		now := r.h.now()
		switch {
		case n == 1:
			return tx.Append(&ma.Event{Type: ma.EventSessionError, ProcessedAt: &now,
				Error: &ma.SessionError{Type: f.errType, Message: f.message + "; retrying from the session log", RetryStatus: ma.RetryStatus{Type: ma.RetryRetrying}}})
		case n == 2 && tx.Session().Status == ma.StatusRunning:
			// The turn is abandoned: tool calls it left marked running
			// are answered now (they may have run), not later.
			if err := answerCutOff(tx, ToolCutOffText, r.h.now()); err != nil {
				return err
			}
			return r.exhaust(tx, f)
		case n == 2:
			return tx.Append(&ma.Event{Type: ma.EventSessionError, ProcessedAt: &now,
				Error: &ma.SessionError{Type: f.errType, Message: f.message, RetryStatus: ma.RetryStatus{Type: ma.RetryExhausted}}})
		default:
			if err := tx.Append(&ma.Event{Type: ma.EventSessionError, ProcessedAt: &now,
				Error: &ma.SessionError{Type: f.errType, Message: f.message + "; the session cannot continue", RetryStatus: ma.RetryStatus{Type: ma.RetryTerminal}}}); err != nil {
				return err
			}
			return r.setStatus(tx, ma.StatusTerminated, &ma.Event{Type: ma.EventStatusTerminated})
		}
	}))))
	if err != nil {
		// The store itself fails: nothing can be recorded. Stop; the
		// session resumes from its log at the next wake-up or start.
		r.h.log.Error("cannot record session failure; runner stops", "session", r.id, "err", err)
		return false
	}
	r.observe(&s)
	r.h.cfg.Bus.Publish(r.id)
	return n < 3
}

func (r *runner) update(ctx context.Context, fn func(store.Tx) error) error {
	s, err := r.h.cfg.Writer.Update(ctx, r.id, r.guard(r.observed(r.inThread(fn))))
	if err == nil {
		r.wrote(&s)
		r.sess = &s
		r.observe(&s)
		r.h.cfg.Bus.Publish(r.id)
	}
	return err
}

// step does the next thing the session needs and reports whether there may
// be more to do.
func (r *runner) step(ctx context.Context) (bool, error) {
	if r.th != nil {
		return r.childStep(ctx)
	}
	gen := r.generation()
	fresh, err := r.refreshLog(ctx)
	if err != nil {
		return false, err
	}
	if err := r.initThreads(); err != nil {
		return false, err
	}
	sess := *r.sess
	r.observeStatus(sess.Status, "") // a turn an earlier runner left
	if sess.Status == ma.StatusTerminated {
		return false, nil
	}
	hasInterrupt, hasInput := r.queued()
	v, client, present, err := r.refreshView(ctx, &sess, fresh)
	if err != nil {
		return false, err
	}
	if r.kids != nil {
		r.superviseChildren(ctx)
		hasInput = hasInput || len(v.inbox) > 0
	}
	if hasInterrupt {
		return true, r.update(ctx, func(tx store.Tx) error { return r.applyInterrupts(tx, v) })
	}
	// A turn that waits for a pull worker that is not there waits in
	// rescheduling, and asks for one.
	needWorker := client && !present && v.awaitsClient()

	switch sess.Status {
	case ma.StatusIdle, ma.StatusRescheduling:
		return r.stepIdle(ctx, &sess, v, needWorker, hasInput)
	case ma.StatusRunning:
		return r.stepRunning(ctx, gen, &sess, v, needWorker)
	}
	return false, nil
}

// refreshLog reads the session's new events into the log cache, and the
// session row when it may have changed; it returns the new events.
func (r *runner) refreshLog(ctx context.Context) ([]ma.Event, error) {
	st := r.h.cfg.Store
	if r.log == nil {
		r.log, r.proj, r.sess = newLogCache(), nil, nil
	}
	fresh, err := r.log.refresh(ctx, st, r.id)
	if err != nil {
		return nil, err
	}
	// The session row changes through this runner's own transactions
	// (which return it) and through updates that log session.updated.
	if r.sess == nil || slices.ContainsFunc(fresh, func(ev ma.Event) bool { return ev.Type == ma.EventSessionUpdated }) {
		s, err := st.GetSession(ctx, r.id)
		if err != nil {
			return nil, err
		}
		r.sess = &s
	}
	return fresh, nil
}

// refreshView brings the session's view up to date with the new events
// fresh, and reports whether a pull worker serves the session (client) and
// whether one is there (present).
func (r *runner) refreshView(ctx context.Context, sess *ma.Session, fresh []ma.Event) (v *view, client, present bool, err error) {
	present = true
	if w := r.h.cfg.Workers; w != nil {
		if client, present, err = w.Serving(ctx, sess); err != nil {
			return nil, false, false, err
		}
	}
	// The view is kept up to date event by event; it is rebuilt from the
	// whole log only when the session changed hands or was compacted.
	r.project(fresh, client, r.proj == nil || r.projClient != client || slices.ContainsFunc(fresh, func(ev ma.Event) bool { return ev.Type == ma.EventAgentContextCompacted }))
	return r.proj.view(), client, present, nil
}

// stepIdle is the step of an idle or rescheduling session: it resumes a
// turn whose tool uses are all answered, waits for a pull worker, or
// starts a turn for queued input.
func (r *runner) stepIdle(ctx context.Context, sess *ma.Session, v *view, needWorker, hasInput bool) (bool, error) {
	if sess.StopReason != nil && sess.StopReason.Type == ma.StopBudgetReached {
		if !r.withinBudget(sess) {
			return false, nil // waits for the budget to be raised or removed
		}
		return true, r.update(ctx, func(tx store.Tx) error {
			return r.setStatus(tx, ma.StatusRunning, &ma.Event{Type: ma.EventStatusRunning})
		})
	}
	if v.turnActive() {
		aw := r.awaitingIDs(v)
		if len(aw) == 0 {
			return true, r.update(ctx, func(tx store.Tx) error {
				return r.setStatus(tx, ma.StatusRunning, &ma.Event{Type: ma.EventStatusRunning})
			})
		}
		if needWorker {
			if sess.Status == ma.StatusRescheduling {
				return false, nil
			}
			return true, r.waitForWorker(ctx, sess)
		}
		if sess.Status == ma.StatusRescheduling || !slices.Equal(aw, v.lastIdleIDs) {
			return true, r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopRequiresAction, aw) })
		}
		return false, nil
	}
	if hasInput {
		return true, r.update(ctx, r.startTurn)
	}
	return false, nil
}

// stepRunning is the step of a running session: it runs the tools that may
// run, goes idle for the ones others answer, or takes the next model (or
// agent end) turn. A coordinator whose model answered waits for its
// threads (coordinate). It reports whether there may be more to do.
func (r *runner) stepRunning(ctx context.Context, gen uint64, sess *ma.Session, v *view, needWorker bool) (bool, error) {
	if a := v.outcome.Active(); a != nil && a.Evaluating() {
		if !r.withinBudget(sess) { // the grader's request is a model request too
			return true, r.stopAtBudget(ctx)
		}
		return true, r.evaluate(ctx, gen, sess, a)
	}
	if rn := v.runnable(); len(rn) > 0 {
		return true, r.runTools(ctx, gen, sess, rn)
	}
	if aw := v.awaitingIDs(); len(aw) > 0 {
		if needWorker {
			return true, r.waitForWorker(ctx, sess)
		}
		aw = r.awaitingIDs(v)
		return true, r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopRequiresAction, aw) })
	}
	if r.kids != nil && v.answered {
		return r.coordinate(ctx)
	}
	if !r.withinBudget(sess) {
		return true, r.stopAtBudget(ctx)
	}
	if r.h.cfg.AgentEnds != nil && ServedByAgentEnd(sess) {
		return true, r.agentTurn(ctx, gen, sess)
	}
	return true, r.callModel(ctx, gen, sess, v)
}

// waitForWorker sets the session rescheduling and asks for a pull worker.
func (r *runner) waitForWorker(ctx context.Context, sess *ma.Session) error {
	if err := r.h.cfg.Workers.NeedWorker(ctx, sess); err != nil {
		return err
	}
	return r.update(ctx, func(tx store.Tx) error {
		return r.setStatus(tx, ma.StatusRescheduling, &ma.Event{Type: ma.EventStatusRescheduled,
			Reason: fmt.Sprintf("waiting for a worker of environment %s to take the session's work", sess.EnvironmentID)})
	})
}

func (r *runner) setStatus(tx store.Tx, status string, ev *ma.Event) error {
	return r.setStatusAt(tx, status, ev, r.h.now())
}

// setStatusAt is setStatus with the caller's timestamp, for events that
// must share one processed_at.
func (r *runner) setStatusAt(tx store.Tx, status string, ev *ma.Event, now string) error {
	s := tx.Session()
	if !isThread(tx) {
		if err := r.clock(tx, s, status, now); err != nil {
			return err
		}
	}
	s.Status = status
	s.StopReason = nil
	if status == ma.StatusIdle {
		s.StopReason = ev.StopReason
	}
	s.UpdatedAt = now
	ev.ProcessedAt = &now
	switch {
	case status == ma.StatusIdle && ev.StopReason != nil:
		r.obs.outcome = ev.StopReason.Type
	case status == ma.StatusTerminated:
		r.obs.outcome = OutcomeTerminated
	}
	if ev.StopReason != nil {
		r.h.log.Debug("session status", "session", r.id, "status", status, "stop_reason", ev.StopReason.Type)
	} else {
		r.h.log.Debug("session status", "session", r.id, "status", status)
	}
	return tx.Append(ev)
}

func (r *runner) idle(tx store.Tx, reason string, ids []string) error {
	return r.setStatus(tx, ma.StatusIdle, &ma.Event{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: reason, EventIDs: ids}})
}

// startTurn consumes the input at the head of the queue (turnInputs) and
// sets the session running.
func (r *runner) startTurn(tx store.Tx) error {
	if s := tx.Session().Status; s != ma.StatusIdle && s != ma.StatusRescheduling {
		return nil
	}
	pending, err := tx.Pending()
	if err != nil {
		return err
	}
	consumed := turnInputs(pending)
	if len(consumed) == 0 && (r.proj == nil || len(r.proj.view().inbox) == 0) {
		return nil
	}
	// One timestamp for the status change and the consumed inputs, so the
	// list (ordered by processed_at) keeps the log order.
	now := r.h.now()
	for _, ev := range consumed {
		ev.ProcessedAt = &now
	}
	if err := r.setStatusAt(tx, ma.StatusRunning, &ma.Event{Type: ma.EventStatusRunning}, now); err != nil {
		return err
	}
	return tx.Append(consumed...)
}

// turnInputs returns the queued inputs one turn consumes: the first one
// (a user.message, or a system.message that trailed a tool result) and
// the system.messages right behind it, which were sent with it. Each
// user.message is a turn of its own, so that what a turn answers never
// depends on when its runner started: two messages sent one after the
// other get two answers, whether the second arrived before the first
// turn started (on this replica or another) or during it. An interrupt
// ends the run: it is applied first.
func turnInputs(pending []ma.Event) []*ma.Event {
	var out []*ma.Event
	for i := range pending {
		ev := &pending[i]
		if ev.Type == ma.EventUserInterrupt || len(out) > 0 && ev.Type != ma.EventSystemMessage {
			break
		}
		out = append(out, ev)
	}
	return out
}

// applyInterrupts consumes queued interrupts; a running turn ends.
func (r *runner) applyInterrupts(tx store.Tx, v *view) error {
	pending, err := tx.Pending()
	if err != nil {
		return err
	}
	now := r.h.now()
	for i := range pending {
		if pending[i].Type != ma.EventUserInterrupt {
			continue
		}
		pending[i].ProcessedAt = &now
		if err := tx.Append(&pending[i]); err != nil {
			return err
		}
	}
	if err := r.interruptThreads(tx); err != nil {
		return err
	}
	if st := tx.Session().Status; st != ma.StatusRunning && !((st == ma.StatusIdle || st == ma.StatusRescheduling) && v.turnActive()) &&
		!sessions.PausedOutcome(tx.Session()) {
		return nil
	}
	// The turn ends: tool calls it cut off are answered now (they may
	// have run), not later.
	if err := answerCutOff(tx, ToolCutOffText, now); err != nil {
		return err
	}
	if v.openSpan != "" {
		if err := tx.Append(spanEnd(v.openSpan, true, nil, now)); err != nil {
			return err
		}
	}
	if err := interruptEvaluation(tx, v, now); err != nil {
		return err
	}
	if err := r.idle(tx, ma.StopEndTurn, nil); err != nil {
		return err
	}
	r.obs.outcome = OutcomeInterrupted
	return nil
}

func spanEnd(startID string, isError bool, usage *ma.ModelUsage, now string) *ma.Event {
	if usage == nil {
		usage = &ma.ModelUsage{}
	}
	return &ma.Event{Type: ma.EventSpanModelRequestEnd, ModelRequestStartID: startID, IsError: &isError, ModelUsage: usage, ProcessedAt: &now}
}

// exhaust ends the turn with an exhausted session.error: queued inputs are
// flushed and the session goes idle with retries_exhausted.
func (r *runner) exhaust(tx store.Tx, f failure) error {
	now := r.h.now()
	ev := &ma.Event{Type: ma.EventSessionError, ProcessedAt: &now, Error: &ma.SessionError{Type: f.errType, Message: f.message, MCPServerName: f.mcpServer,
		CredentialID: f.credentialID, VaultID: f.vaultID, RetryStatus: ma.RetryStatus{Type: ma.RetryExhausted}}}
	if err := tx.Append(ev); err != nil {
		return err
	}
	pending, err := tx.Pending()
	if err != nil {
		return err
	}
	for i := range pending {
		if pending[i].Type == ma.EventUserInterrupt {
			continue
		}
		pending[i].Flushed = true
		if err := tx.Append(&pending[i]); err != nil {
			return err
		}
	}
	return r.idle(tx, ma.StopRetriesExhausted, nil)
}

// callModel makes one model call of the turn, with the retry policy, and
// records its outcome.
func (r *runner) callModel(ctx context.Context, gen uint64, sess *ma.Session, v *view) error {
	if limit := r.h.cfg.MaxToolRounds; limit > 0 && r.toolRounds() >= limit {
		return r.update(ctx, func(tx store.Tx) error {
			return r.exhaust(tx, failure{errType: ma.ErrorToolUseLimitReached,
				message: fmt.Sprintf("the turn stopped at the limit of %d tool-use rounds (reins serve --max-tool-rounds)", limit)})
		})
	}
	plan := planTools(&sess.Agent)
	r.planDelegation(plan)
	req, err := r.modelRequest(ctx, sess, v, plan)
	if err != nil {
		return err
	}
	if compacted, err := r.compactIfFull(ctx, sess, req); compacted || err != nil {
		// The next step projects the compacted log and calls the model.
		return err
	}
	if stop, err := r.checkCredentials(ctx, gen, sess); stop {
		return err
	}
	c := &modelCall{sess: sess, v: v, plan: plan, req: req, mcpListed: r.h.cfg.MCP == nil || !hasMCPToolsets(&sess.Agent)}
	for attempt := 1; ; attempt++ {
		if retry, err := r.modelAttempt(ctx, gen, c, attempt); !retry {
			return err
		}
	}
}

// modelCall is one model call of a turn, across its attempts.
type modelCall struct {
	sess      *ma.Session
	v         *view
	plan      *toolPlan
	req       *model.Request
	mcpListed bool // req offers the MCP servers' tools (or there are none)
}

// modelRequest builds the model request of the session's next call from
// its agent and view.
func (r *runner) modelRequest(ctx context.Context, sess *ma.Session, v *view, plan *toolPlan) (*model.Request, error) {
	req := &model.Request{
		Model:     sess.Agent.Model.ID,
		Speed:     sess.Agent.Model.Speed,
		System:    sess.Agent.System,
		Messages:  v.messages,
		Tools:     plan.offered,
		MaxTokens: r.h.cfg.MaxTokens,
		SessionID: sess.ID,
	}
	if sess.Agent.Model.Effort != nil {
		req.Effort = sess.Agent.Model.Effort.Type
	}
	if p := r.h.cfg.Skills; p != nil && len(sess.Agent.Skills) > 0 {
		text, err := p.SkillsPrompt(ctx, sess)
		if err != nil {
			return nil, fmt.Errorf("describe the session's skills: %w", err)
		}
		req.System = joinPrompt(req.System, text)
	}
	req.System = joinPrompt(req.System, memoryPrompt(sess))
	return req, nil
}

// compactIfFull compacts the session's log when req comes near the model's
// context window, and reports whether it did (or tried and failed).
func (r *runner) compactIfFull(ctx context.Context, sess *ma.Session, req *model.Request) (bool, error) {
	window := r.h.contextWindow(req.Model)
	if estimateTokens(req.System, req.Messages, req.Tools) <= int(float64(window)*compactAt) {
		return false, nil
	}
	through, summary, ok := compaction(r.liveEvents(), window)
	if !ok {
		r.h.log.Warn("transcript near the context window and no turn boundary to compact at", "session", sess.ID, "window", window)
		return false, nil
	}
	if limit := r.h.cfg.MaxCompactions; limit > 0 && r.compactionsInARow() >= limit {
		return true, r.update(ctx, func(tx store.Tx) error {
			return r.exhaust(tx, failure{errType: ma.ErrorCompactionLimitReached,
				message: fmt.Sprintf("the turn stopped at the limit of %d compactions of the context in a row without a model message or tool call (reins serve --max-compactions)", limit)})
		})
	}
	err := r.update(ctx, func(tx store.Tx) error {
		now := r.h.now()
		return tx.Append(&ma.Event{Type: ma.EventAgentContextCompacted, ProcessedAt: &now, CompactedThrough: through,
			Content: []ma.ContentBlock{{Type: "text", Text: summary}}})
	})
	return true, err
}

// checkCredentials checks the session's vault credentials against its
// environment's policy before a model call. A mismatch ends the turn with
// an error no retry can fix; stop says the call must not go ahead.
func (r *runner) checkCredentials(ctx context.Context, gen uint64, sess *ma.Session) (stop bool, err error) {
	c := r.h.cfg.Credentials
	if c == nil || len(sess.VaultIDs) == 0 {
		return false, nil
	}
	err = c.Check(ctx, sess.ID, sess.EnvironmentID, sess.VaultIDs)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, store.ErrUnavailable):
		return true, err // a delay (waitForStore), not the credentials' failure
	}
	f := classify(err)
	f.retryable = false // no retry can fix a policy mismatch
	if _, ok := credentialFailure(err); !ok {
		f = failure{errType: ma.ErrorUnknown, message: "checking the session's credentials: " + err.Error(), retryable: false}
	}
	_, err = r.failAttempt(ctx, gen, f, 1, "")
	return true, err
}

// modelAttempt makes one attempt at the model call c: it lists the MCP
// servers' tools if not yet done, streams the model's response and records
// it, or applies the retry policy to a failure (retry: try again).
func (r *runner) modelAttempt(ctx context.Context, gen uint64, c *modelCall, attempt int) (retry bool, err error) {
	if !c.mcpListed {
		// The MCP servers' tools, listed at the start of each model
		// call (connections are pooled per session).
		tools, stop, err := r.mcpTools(ctx, gen, c.sess)
		switch {
		case stop:
			return false, err
		case err != nil:
			return r.failAttempt(ctx, gen, classify(err), attempt, "")
		}
		planMCP(c.plan, &c.sess.Agent, tools)
		c.req.Tools = c.plan.offered
		c.mcpListed = true
	}
	startID, err := r.startModelSpan(ctx, c.v)
	if err != nil {
		return false, err
	}
	sink := &previewSink{p: r.h.previews, sessionID: c.sess.ID, messageID: ids.New(ids.Event), thinkingID: ids.New(ids.Event)}
	resp, interrupted, err := r.streamModel(ctx, gen, c.sess.ID, c.req, sink)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if interrupted {
		return false, nil // the next step reads the interrupt and ends the turn
	}
	if err == nil {
		return false, r.update(ctx, func(tx store.Tx) error { return r.record(tx, c.sess, c.plan, startID, sink, resp) })
	}
	f := classify(err)
	r.h.log.Warn("model call failed", "session", c.sess.ID, "attempt", attempt, "type", f.errType, "err", err)
	retry, err = r.failAttempt(ctx, gen, f, attempt, startID)
	c.v.openSpan = ""
	return retry, err
}

// mcpTools lists the session's MCP servers' tools. stop says the turn's
// step ends here: with ctx's error, or nil after an interrupt.
func (r *runner) mcpTools(ctx context.Context, gen uint64, sess *ma.Session) (tools []tool.MCPTool, stop bool, err error) {
	tctx, done := r.turnContext(ctx, gen)
	tools, err = r.h.cfg.MCP.Tools(tctx, sess)
	interrupted := tctx.Err() != nil && ctx.Err() == nil
	done()
	switch {
	case ctx.Err() != nil:
		return nil, true, ctx.Err()
	case interrupted:
		return nil, true, nil
	}
	return tools, false, err
}

// startModelSpan records the start of a model request span, closing the
// one a crash or shutdown left open, and returns its event id.
func (r *runner) startModelSpan(ctx context.Context, v *view) (string, error) {
	startID := ids.New(ids.Event)
	err := r.update(ctx, func(tx store.Tx) error {
		now := r.h.now()
		if v.openSpan != "" {
			// A call that a crash or shutdown cut short.
			if err := tx.Append(spanEnd(v.openSpan, true, nil, now)); err != nil {
				return err
			}
		}
		return tx.Append(&ma.Event{Type: ma.EventSpanModelRequestStart, ID: startID, ProcessedAt: &now})
	})
	if err != nil {
		return "", err
	}
	v.openSpan = startID
	return startID, nil
}

// streamModel makes the model request, streaming previews into sink, and
// reports whether an interrupt of the turn cut it short.
func (r *runner) streamModel(ctx context.Context, gen uint64, sessionID string, req *model.Request, sink *previewSink) (*model.Response, bool, error) {
	mctx, end := r.h.obs.ModelCall(r.turnParent(), sessionID, req.Model)
	tctx, done := r.turnContext(ctx, gen)
	resp, err := r.h.cfg.Model.Stream(tctx, req, sink)
	interrupted := tctx.Err() != nil && ctx.Err() == nil
	done()
	end(callOutcome(ctx, interrupted, err != nil))
	if r.turn != nil {
		r.turn.model = mctx
	}
	return resp, interrupted, err
}

// failAttempt applies the retry policy to a failed attempt: it records a
// retrying session.error and waits out the backoff (true: try again), or
// ends the turn with an exhausted one (false). spanID, if set, is the model
// request span to close. An interrupt during the wait ends it at once
// (false, nil: the next step reads the interrupt).
func (r *runner) failAttempt(ctx context.Context, gen uint64, f failure, attempt int, spanID string) (bool, error) {
	delay, exhausted, err := r.recordFailure(ctx, f, attempt, spanID)
	if exhausted || err != nil {
		return false, err
	}
	tctx, done := r.turnContext(ctx, gen)
	defer done()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-tctx.Done():
	case <-r.h.draining:
		// The next runner, on another replica, retries at once.
		return false, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return tctx.Err() == nil, nil
}

// recordFailure applies the retry policy to a failed attempt and records
// it: a retrying session.error and the delay before the next attempt, or
// an exhausted one that ends the turn (exhausted true). spanID, if set, is
// the model request span to close.
func (r *runner) recordFailure(ctx context.Context, f failure, attempt int, spanID string) (delay time.Duration, exhausted bool, err error) {
	policy := r.h.cfg.Retry
	if !f.retryable || attempt >= policy.MaxAttempts {
		return 0, true, r.update(ctx, func(tx store.Tx) error {
			if spanID != "" {
				if err := tx.Append(spanEnd(spanID, true, nil, r.h.now())); err != nil {
					return err
				}
			}
			return r.exhaust(tx, f)
		})
	}
	delay = policy.Delay(attempt, f.retryAfter)
	err = r.update(ctx, func(tx store.Tx) error {
		now := r.h.now()
		if spanID != "" {
			if err := tx.Append(spanEnd(spanID, true, nil, now)); err != nil {
				return err
			}
		}
		return tx.Append(&ma.Event{Type: ma.EventSessionError, ProcessedAt: &now,
			Error: &ma.SessionError{Type: f.errType, Message: retryMessage(f, attempt, policy.MaxAttempts, delay), MCPServerName: f.mcpServer,
				RetryStatus: ma.RetryStatus{Type: ma.RetryRetrying}}})
	})
	return delay, false, err
}

func retryMessage(f failure, attempt, max int, delay time.Duration) string {
	return fmt.Sprintf("%s; retrying in %s (attempt %d of %d)", f.message, delay.Round(100*time.Millisecond), attempt+1, max)
}

// record appends a successful model response.
func (r *runner) record(tx store.Tx, sess *ma.Session, plan *toolPlan, startID string, sink *previewSink, resp *model.Response) error {
	now := r.h.now()
	if resp.Thinking {
		if err := tx.Append(&ma.Event{Type: ma.EventAgentThinking, ID: sink.thinkingID, ProcessedAt: &now}); err != nil {
			return err
		}
	}
	if err := recordContent(tx, sink.messageID, resp.Content, now); err != nil {
		return err
	}
	uses := 0
	for _, b := range resp.Content {
		if b.Type != model.BlockToolUse {
			continue
		}
		uses++
		input := b.Input
		if len(input) == 0 {
			input = []byte("{}")
		}
		ev := &ma.Event{Type: ma.EventAgentToolUse, Name: b.Name, Input: input, ProcessedAt: &now}
		var unknown bool
		mt, isMCP := plan.mcp[b.Name]
		switch {
		case isMCP:
			ev.Type, ev.MCPServerName, ev.Name = ma.EventAgentMCPToolUse, mt.server, mt.tool
			ev.EvaluatedPermission, ev.Evaluation = ma.Evaluate(mt.policy)
		case plan.custom[b.Name]:
			ev.Type = ma.EventAgentCustomToolUse
		case plan.builtin[b.Name] != "":
			ev.EvaluatedPermission, ev.Evaluation = ma.Evaluate(plan.builtin[b.Name])
		default:
			ev.EvaluatedPermission = "deny"
			unknown = true
		}
		if err := tx.Append(ev); err != nil {
			return err
		}
		if unknown {
			isErr := true
			if err := tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: ev.ID, IsError: &isErr, ProcessedAt: &now,
				Content: []ma.ContentBlock{{Type: "text", Text: fmt.Sprintf("The tool %q is not available to this agent.", b.Name)}}}); err != nil {
				return err
			}
		}
	}
	u := resp.Usage
	if err := r.endSpan(tx, sess.Agent.Model.ID, startID, false, u, now); err != nil {
		return err
	}
	r.h.log.Debug("model response", "session", r.id, "stop_reason", resp.StopReason, "tool_uses", uses,
		"input_tokens", u.InputTokens, "output_tokens", u.OutputTokens)
	if uses == 0 && resp.StopReason == model.StopRefusal {
		return r.refused(tx, blocksToContent(resp.Content), resp.Refusal)
	}
	if uses == 0 && resp.StopReason != model.StopPauseTurn {
		return r.turnEnds(tx, blocksToContent(resp.Content), now)
	}
	// Tool uses to run, or a turn of server tools the API paused: the
	// next step calls the model again.
	return nil
}

// endSpan closes a model request span with the call's usage and adds the
// usage to the session's totals; modelID prices it.
func (r *runner) endSpan(tx store.Tx, modelID, startID string, isError bool, u model.Usage, now string) error {
	if err := tx.Append(spanEnd(startID, isError, &ma.ModelUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens, CacheReadInputTokens: u.CacheReadInputTokens}, now)); err != nil {
		return err
	}
	s := tx.Session()
	if u.WebSearchRequests > 0 || u.WebFetchRequests > 0 {
		if s.Usage.ServerToolUse == nil {
			s.Usage.ServerToolUse = &ma.ServerToolUsage{}
		}
		s.Usage.ServerToolUse.WebSearchRequests += u.WebSearchRequests
		s.Usage.ServerToolUse.WebFetchRequests += u.WebFetchRequests
	}
	s.Usage.InputTokens += u.InputTokens
	s.Usage.OutputTokens += u.OutputTokens
	s.Usage.CacheReadInputTokens += u.CacheReadInputTokens
	s.Usage.CacheCreation.Ephemeral5mInputTokens += u.CacheCreationInputTokens
	s.UpdatedAt = now
	r.meter(s, modelID, u, now)
	return nil
}

// recordContent appends the text and server tool blocks of a response in
// their order: each run of text blocks as an agent.message (the first one
// with the id its previews used), each server tool use as an
// agent.tool_use and its result as an agent.tool_result, both carrying the
// API's block to be replayed verbatim.
func recordContent(tx store.Tx, messageID string, blocks []model.Block, now string) error {
	var text []ma.ContentBlock
	flush := func() error {
		if len(text) == 0 {
			return nil
		}
		ev := &ma.Event{Type: ma.EventAgentMessage, ID: messageID, ProcessedAt: &now, Content: text}
		messageID, text = "", nil
		return tx.Append(ev)
	}
	uses := map[string]string{} // API tool use id -> event id
	for _, b := range blocks {
		switch b.Type {
		case model.BlockText, model.BlockRedacted:
			text = append(text, blocksToContent([]model.Block{b})...)
		case model.BlockServer:
			if err := flush(); err != nil {
				return err
			}
			ev := serverEvent(b, uses, now)
			if err := tx.Append(ev); err != nil {
				return err
			}
			if ev.Type == ma.EventAgentToolUse {
				uses[b.ID] = ev.ID
			}
		}
	}
	return flush()
}

// reschedule waits in "rescheduling" until the tools may be placed, or an
// interrupt or shutdown comes.
func (r *runner) reschedule(ctx context.Context, gen uint64, wait *tool.Wait) error {
	err := r.update(ctx, func(tx store.Tx) error {
		if tx.Session().Status != ma.StatusRunning {
			return nil
		}
		return r.setStatus(tx, ma.StatusRescheduling, &ma.Event{Type: ma.EventStatusRescheduled, Reason: wait.Reason})
	})
	if err != nil {
		return err
	}
	tctx, done := r.turnContext(ctx, gen)
	defer done()
	select {
	case <-wait.C:
	case <-r.wake: // something changed (for example a pull worker arrived)
	case <-tctx.Done():
	case <-r.h.draining: // the next runner, on another replica, places it
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil // the next step sets the session running again, or reads the interrupt
}

// runTools runs the tool uses that may run, one at a time, recording each
// result as soon as it is known.
func (r *runner) runTools(ctx context.Context, gen uint64, sess *ma.Session, uses []awaiting.Use) error {
	for _, u := range uses {
		r.h.log.Debug("tool call", "session", r.id, "tool", u.Event.Name, "type", u.Event.Type, "event", u.Event.ID)
	}
	if stop, err := r.placeTools(ctx, gen, sess, uses); stop {
		return err
	}
	for _, u := range uses {
		if more, err := r.runToolUse(ctx, gen, sess, uses, u); !more || err != nil {
			return err
		}
	}
	return nil
}

// runsHere reports whether the tool use u is a built-in tool that runs in
// the session's sandbox (placed), not in the server (web_fetch, the
// delegation tools).
func (r *runner) runsHere(u awaiting.Use) bool {
	return u.Event.Type == ma.EventAgentToolUse && u.Event.Name != toolset.WebFetch && !r.isDelegation(u)
}

// placeTools places the session's sandbox when uses has built-in tools
// that run there and the tool runner places. stop says the step ends here:
// placement failed (the tools are answered with the error), must wait, or
// was cut short.
func (r *runner) placeTools(ctx context.Context, gen uint64, sess *ma.Session, uses []awaiting.Use) (stop bool, err error) {
	p, ok := r.h.cfg.Tools.(tool.Placer)
	if !ok || !slices.ContainsFunc(uses, r.runsHere) {
		return false, nil
	}
	tctx, done := r.turnContext(ctx, gen)
	wait, err := p.Place(tctx, sess)
	interrupted := tctx.Err() != nil && ctx.Err() == nil
	done()
	switch {
	case ctx.Err() != nil:
		return true, ctx.Err()
	case interrupted:
		return true, nil
	case err != nil:
		return true, r.update(ctx, func(tx store.Tx) error { return r.failPlacement(tx, uses, err) })
	case wait != nil:
		return true, r.reschedule(ctx, gen, wait)
	}
	return false, nil
}

// failPlacement answers the built-in tool uses that run in the sandbox
// with the placement's error.
func (r *runner) failPlacement(tx store.Tx, uses []awaiting.Use, err error) error {
	now := r.h.now()
	isErr := true
	for _, u := range uses {
		if !r.runsHere(u) {
			continue
		}
		if err := tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: u.Event.ID, IsError: &isErr, ProcessedAt: &now,
			Content: []ma.ContentBlock{{Type: "text", Text: fmt.Sprintf("The tool %s could not run: %v", u.Event.Name, err)}}}); err != nil {
			return err
		}
	}
	return nil
}

// runToolUse runs the tool use u (one of uses) and records its result;
// more says the next use may run.
func (r *runner) runToolUse(ctx context.Context, gen uint64, sess *ma.Session, uses []awaiting.Use, u awaiting.Use) (more bool, err error) {
	if r.isDelegation(u) {
		err := r.delegate(ctx, u)
		return err == nil, err
	}
	if u.Event.Type == ma.EventAgentMCPToolUse {
		return r.callMCP(ctx, gen, sess, u)
	}
	if res, ok := r.takeKept(u.Event.ID); ok {
		err := r.finishTool(ctx, u.Event.ID, res)
		return err == nil, err
	}
	answered, err := r.markToolRunning(ctx, uses, u.Event.ID)
	if err != nil {
		return false, err
	}
	if answered {
		r.h.log.Warn("tools were running when the server stopped; told the model they may or may not have run", "session", r.id)
		return false, nil // the next step runs the others
	}
	_, end := r.h.obs.ToolCall(r.toolParent(), sess.ID, u.Event.Name, "")
	tctx, done := r.turnContext(ctx, gen)
	res := r.toolRunner(u.Event.Name).RunTool(tctx, sess, tool.Call{ID: u.Event.ID, Name: u.Event.Name, Input: u.Event.Input})
	interrupted := tctx.Err() != nil && ctx.Err() == nil
	done()
	end(callOutcome(ctx, interrupted, res.IsError))
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if interrupted {
		return false, nil
	}
	err = r.finishTool(ctx, u.Event.ID, res)
	return err == nil, err
}

// markToolRunning marks the tool use toolUseID running. The mark says the
// tool may have run if this process stops before its result is in the
// log; the next runner answers it then. The first mark of a runner answers
// the tools an earlier process left running instead, if any (answered).
func (r *runner) markToolRunning(ctx context.Context, uses []awaiting.Use, toolUseID string) (answered bool, err error) {
	err = r.update(ctx, func(tx store.Tx) error {
		if !r.settled {
			var err error
			if answered, err = r.answerInterrupted(tx, uses); err != nil || answered {
				return err
			}
		}
		return tx.MarkToolRunning(toolUseID)
	})
	if err != nil {
		return false, err
	}
	r.settled = true
	return answered, nil
}

// finishTool records the result of a built-in tool that ran and removes
// its running mark.
func (r *runner) finishTool(ctx context.Context, toolUseID string, res tool.Result) error {
	isErr := res.IsError
	err := r.update(ctx, func(tx store.Tx) error {
		now := r.h.now()
		for _, e := range res.Errors {
			if err := tx.Append(&ma.Event{Type: ma.EventSessionError, ProcessedAt: &now, Error: &e}); err != nil {
				return err
			}
		}
		if err := tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: toolUseID, Content: res.Content, IsError: &isErr, ProcessedAt: &now}); err != nil {
			return err
		}
		return tx.UnmarkToolRunning(toolUseID)
	})
	r.keep(toolUseID, res, err)
	return err
}

// toolRunner returns what runs the named built-in tool: the executors,
// or, for web_fetch, this process.
func (r *runner) toolRunner(name string) tool.Runner {
	if name != toolset.WebFetch {
		return r.h.cfg.Tools
	}
	if r.h.cfg.WebFetch == nil {
		return noWebFetch{}
	}
	return r.h.cfg.WebFetch
}

// callMCP calls an MCP tool and records its result. A server that cannot
// be reached is retried per the policy (retrying, then exhausted). done is
// false when the turn ended or was interrupted instead.
func (r *runner) callMCP(ctx context.Context, gen uint64, sess *ma.Session, u awaiting.Use) (done bool, err error) {
	res, kept := r.takeKept(u.Event.ID)
	for attempt := 1; !kept; attempt++ {
		if r.h.cfg.MCP == nil {
			res = tool.ErrorResult("MCP servers are not available on this server.")
			break
		}
		_, end := r.h.obs.ToolCall(r.toolParent(), sess.ID, u.Event.Name, u.Event.MCPServerName)
		tctx, release := r.turnContext(ctx, gen)
		var cerr error
		res, cerr = r.h.cfg.MCP.Call(tctx, sess, u.Event.MCPServerName, u.Event.Name, u.Event.Input)
		interrupted := tctx.Err() != nil && ctx.Err() == nil
		release()
		end(callOutcome(ctx, interrupted, cerr != nil || res.IsError))
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case interrupted:
			return false, nil
		case cerr == nil:
		default:
			f, ok := mcpFailure(cerr)
			if !ok {
				res = tool.ErrorResult(fmt.Sprintf("The MCP tool %s could not run: %v", u.Event.Name, cerr))
				break
			}
			retry, err := r.failAttempt(ctx, gen, f, attempt, "")
			if !retry {
				return false, err
			}
			continue
		}
		break
	}
	isErr := res.IsError
	err = r.update(ctx, func(tx store.Tx) error {
		now := r.h.now()
		return tx.Append(&ma.Event{Type: ma.EventAgentMCPToolResult, MCPToolUseID: u.Event.ID, Content: res.Content, IsError: &isErr, ProcessedAt: &now})
	})
	r.keep(u.Event.ID, res, err)
	return true, err
}

// refused ends a turn the model refused: the thread goes idle with the
// stop reason refusal and the model's stop_details (a child thread first
// replies what it has, so that its coordinator is not left waiting).
func (r *runner) refused(tx store.Tx, answer []ma.ContentBlock, why *model.Refusal) error {
	if r.th != nil {
		if err := r.reply(tx, answer); err != nil {
			return err
		}
	}
	d := ma.RefusalDetails{Type: ma.StopRefusal}
	if why != nil && why.Category != "" {
		d.Category = &why.Category
	}
	if why != nil && why.Explanation != "" {
		d.Explanation = &why.Explanation
	}
	details, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return r.setStatus(tx, ma.StatusIdle, &ma.Event{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRefusal}, StopDetails: details})
}

// toolRounds counts the tool-use rounds of the thread's current turn: its
// model requests that succeeded since it was last idle (each one that did
// not end the turn asked for tools). A turn cut by a compaction counts
// from the compaction.
func (r *runner) toolRounds() int {
	evs := r.liveEvents()
	n := 0
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Type {
		case ma.EventStatusIdle, ma.EventThreadStatusIdle:
			return n
		case ma.EventSpanModelRequestEnd:
			if evs[i].IsError == nil || !*evs[i].IsError {
				n++
			}
		}
	}
	return n
}

// compactionsInARow counts the compactions of the thread's context since
// the model last produced a message or tool call, within the current turn
// (the count starts again when the thread was last idle). It is read from
// the log, so a restart does not reset it.
func (r *runner) compactionsInARow() int {
	evs := r.liveEvents()
	n := 0
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Type {
		case ma.EventStatusIdle, ma.EventThreadStatusIdle, ma.EventAgentMessage,
			ma.EventAgentToolUse, ma.EventAgentMCPToolUse, ma.EventAgentCustomToolUse:
			return n
		case ma.EventAgentContextCompacted:
			n++
		}
	}
	return n
}
