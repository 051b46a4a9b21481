package harness

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/reinsdev/reins/internal/agents"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Threads of a multi-agent session. The session's runner runs its primary
// thread (the coordinator) as it runs any session, and hosts one child
// runner per child thread: each projects only its thread's events, runs
// its thread's agent, and writes through the session's writer, one
// transaction at a time, tagged with its thread's id. The primary's turn
// covers its children's: it stays active (the session running) while a
// child runs, waits for their replies once its model has answered, and
// ends when nothing runs and no reply is left to read. Everything a
// thread does is in the log, so a new runner continues every thread
// from it.

// errThreadMoved is the error of a child runner's transaction whose
// thread changed under it (the primary ended its turn or archived it):
// nothing is written and the runner reads the log again.
var errThreadMoved = errors.New("the thread changed since its runner read the log")

// thread is what a child thread's runner knows of its thread.
type thread struct {
	id     string
	parent *runner         // the session's runner
	agent  *ma.ThreadAgent // from the thread's row, read once
	status string          // as the log said at the runner's last read
}

// childState is what the session's runner knows of a child thread, as
// the log says.
type childState struct {
	id, name string
	status   string
	stop     *ma.StopReason
	openSpan string
}

// turnActive reports whether the child's turn is under way (running, or
// idle waiting on its client).
func (c *childState) turnActive() bool {
	switch c.status {
	case ma.StatusRunning, ma.StatusRescheduling:
		return true
	case ma.StatusIdle:
		return c.stop != nil && c.stop.Type == ma.StopRequiresAction
	}
	return false
}

// threadSet is the session runner's side of the child threads: their
// state as the log says and their runners.
type threadSet struct {
	cfg  *agents.Multiagent
	list []*childState
	byID map[string]*childState

	ctx    context.Context // the children's runners'; ends at stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards runners (Interrupt reads it)
	runners map[string]*runner
}

func newThreadSet(cfg *agents.Multiagent) *threadSet {
	return &threadSet{cfg: cfg, byID: map[string]*childState{}, runners: map[string]*runner{}}
}

// reset forgets the threads' state (the log is read anew); their runners
// stay.
func (s *threadSet) reset() {
	s.list, s.byID = nil, map[string]*childState{}
}

// feed folds one event of the session's log (any thread's).
func (s *threadSet) feed(sessionID string, ev *ma.Event) {
	if ev.Type == ma.EventThreadCreated {
		if s.byID[ev.SessionThreadID] == nil {
			c := &childState{id: ev.SessionThreadID, name: ev.AgentName, status: ma.StatusIdle}
			s.list = append(s.list, c)
			s.byID[c.id] = c
		}
		return
	}
	c := s.byID[ma.StreamThread(sessionID, ev)]
	if c == nil {
		return
	}
	switch ev.Type {
	case ma.EventThreadStatusRunning:
		c.status, c.stop = ma.StatusRunning, nil
	case ma.EventThreadStatusIdle:
		c.status, c.stop = ma.StatusIdle, ev.StopReason
	case ma.EventThreadStatusRescheduled:
		c.status = ma.StatusRescheduling
	case ma.EventThreadStatusTerminated:
		c.status, c.stop = ma.StatusTerminated, nil
	case ma.EventSpanModelRequestStart:
		c.openSpan = ev.ID
	case ma.EventSpanModelRequestEnd:
		c.openSpan = ""
	}
}

// busy reports whether a child thread runs (or waits to be placed).
func (s *threadSet) busy() bool {
	return slices.ContainsFunc(s.list, func(c *childState) bool {
		return c.status == ma.StatusRunning || c.status == ma.StatusRescheduling
	})
}

// awaiting returns the ids of the children's tool uses that wait for the
// client, as their last idle said.
func (s *threadSet) awaiting() []string {
	var out []string
	for _, c := range s.list {
		if c.status == ma.StatusIdle && c.stop != nil && c.stop.Type == ma.StopRequiresAction {
			out = append(out, c.stop.EventIDs...)
		}
	}
	return out
}

// initThreads makes r the runner of a multi-agent session when the
// session's agent has a multiagent configuration.
func (r *runner) initThreads() error {
	if r.kids != nil || r.th != nil || r.sess == nil || len(r.sess.Agent.Multiagent) == 0 {
		return nil
	}
	cfg, err := agents.SessionMultiagent(r.sess.Agent)
	if err != nil || cfg == nil {
		return err
	}
	r.mu.Lock()
	r.kids = newThreadSet(cfg)
	r.mu.Unlock()
	return nil
}

// inThread restricts a transaction of a multi-agent session to r's
// thread (see threadTx); single-agent sessions' are left as they are.
func (r *runner) inThread(fn func(store.Tx) error) func(store.Tx) error {
	if r.kids == nil && r.th == nil {
		return fn
	}
	return func(tx store.Tx) error {
		tt := &threadTx{Tx: tx, sessionID: r.id}
		if r.th != nil {
			if err := tt.bind(r.th); err != nil {
				return err
			}
		}
		if err := fn(tt); err != nil {
			return err
		}
		if tt.row != nil {
			r.txStatus = tt.row.Status
		}
		return tt.flush()
	}
}

// wrote does what follows a committed write of r, given the session row
// it left: a child's status is the one it wrote (and what the row says
// to the observer), and the session's runner looks at what it did.
func (r *runner) wrote(s *ma.Session) {
	if r.th == nil {
		return
	}
	r.th.status = r.txStatus
	s.Status = r.txStatus
	r.th.parent.signal()
}

// ofThread reports whether ev is an event of r's thread.
func (r *runner) ofThread(ev *ma.Event) bool {
	tid := ""
	if r.th != nil {
		tid = r.th.id
	}
	return ma.StreamThread(r.id, ev) == tid
}

// threadEvents returns the events of r's thread among evs, a child's
// status events as the session's (what the projection folds).
func (r *runner) threadEvents(evs []ma.Event) []ma.Event {
	if r.kids == nil && r.th == nil {
		return evs
	}
	out := make([]ma.Event, 0, len(evs))
	for i := range evs {
		if r.ofThread(&evs[i]) {
			out = append(out, asSessionStatus(evs[i]))
		}
	}
	return out
}

// liveEvents returns the live events of r's thread.
func (r *runner) liveEvents() []ma.Event {
	return r.threadEvents(r.log.live())
}

// project brings r's view up to date with the fresh events of the log,
// or builds it from the whole log (rebuild). A session runner of a
// multi-agent session also folds every thread's state.
func (r *runner) project(fresh []ma.Event, client, rebuild bool) {
	if rebuild {
		live := r.log.live()
		if r.kids != nil {
			r.kids.reset()
			for i := range live {
				r.kids.feed(r.id, &live[i])
			}
		}
		r.proj, r.projClient = projectAll(r.threadEvents(live), client), client
		return
	}
	if r.kids != nil {
		for i := range fresh {
			r.kids.feed(r.id, &fresh[i])
		}
	}
	for _, ev := range r.threadEvents(fresh) {
		r.proj.feed(ev)
	}
}

// asSessionStatus returns a child's status event as the session status
// event it plays in the child's view.
func asSessionStatus(ev ma.Event) ma.Event {
	switch ev.Type {
	case ma.EventThreadStatusRunning:
		ev.Type = ma.EventStatusRunning
	case ma.EventThreadStatusIdle:
		ev.Type = ma.EventStatusIdle
	case ma.EventThreadStatusRescheduled:
		ev.Type = ma.EventStatusRescheduled
	case ma.EventThreadStatusTerminated:
		ev.Type = ma.EventStatusTerminated
	}
	return ev
}

// queued reports whether an interrupt, and whether other input, waits
// for r's thread.
func (r *runner) queued() (interrupt, input bool) {
	if r.kids == nil && r.th == nil {
		return r.log.queued()
	}
	tid := ""
	if r.th != nil {
		tid = r.th.id
	}
	return r.log.queuedFor(func(thread string) bool {
		if thread == ma.PrimaryThreadID(r.id) {
			thread = ""
		}
		return thread == tid
	})
}

// awaitingIDs returns the tool uses the session waits on its client for:
// the primary thread's and, once its model answered (it has nothing else
// to do), its children's.
func (r *runner) awaitingIDs(v *view) []string {
	aw := v.awaitingIDs()
	if r.kids == nil || (len(aw) == 0 && !v.answered) {
		return aw
	}
	return append(aw, r.kids.awaiting()...)
}

// turnEnds is what record does when the model answered without a tool
// use. A session's turn ends (endAgentTurn: idle with end_turn, or the
// outcome's evaluation) unless its threads keep it: a child first
// replies to the primary thread with its answer; a thread with messages
// to read goes on; the primary thread goes on while its children run or
// wait.
func (r *runner) turnEnds(tx store.Tx, answer []ma.ContentBlock, now string) error {
	if r.kids == nil && r.th == nil {
		return r.endAgentTurn(tx, now)
	}
	if r.th != nil {
		if err := r.reply(tx, answer); err != nil {
			return err
		}
	}
	more, err := r.inputSince(tx)
	if err != nil || more {
		return err
	}
	if r.th != nil {
		return r.idle(tx, ma.StopEndTurn, nil)
	}
	if busy, err := r.childrenBusy(tx); err != nil || busy {
		return err
	}
	return r.endAgentTurn(tx, now)
}

// inputSince reports whether r's thread has thread messages it has not
// read into its transcript: some waiting in its view, or some written
// since its runner read the log.
func (r *runner) inputSince(tx store.Tx) (bool, error) {
	if r.proj != nil && len(r.proj.view().inbox) > 0 {
		return true, nil
	}
	entries, err := tx.ReadLog(r.log.seq)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(entries, func(e store.Entry) bool {
		return e.Event.Type == ma.EventThreadMessageReceived && r.ofThread(&e.Event)
	}), nil
}

// childrenBusy reports, in tx, whether a child thread's turn is under
// way: its row says it runs, or the log said it waits for the client.
func (r *runner) childrenBusy(tx store.Tx) (bool, error) {
	rows, err := tx.Threads()
	if err != nil {
		return false, err
	}
	for _, th := range rows {
		if th.ArchivedAt == nil && (th.Status == ma.StatusRunning || th.Status == ma.StatusRescheduling) {
			return true, nil
		}
	}
	return len(r.kids.awaiting()) > 0, nil
}

// coordinate is the step of a primary thread whose model answered: it
// waits while a child runs (idle with budget_reached once the session's
// cost reached its budget, as the children pause there), goes idle on
// requires_action while children wait for the client, and ends the turn
// when nothing is left.
func (r *runner) coordinate(ctx context.Context) (bool, error) {
	if r.kids.busy() {
		over, err := r.overBudget(ctx)
		if err != nil || !over {
			return false, err // a child's write wakes the runner
		}
		return true, r.stopAtBudget(ctx)
	}
	if aw := r.kids.awaiting(); len(aw) > 0 {
		return true, r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopRequiresAction, aw) })
	}
	return true, r.update(ctx, func(tx store.Tx) error {
		more, err := r.inputSince(tx)
		if err != nil || more {
			return err
		}
		if busy, err := r.childrenBusy(tx); err != nil || busy {
			return err
		}
		return r.endAgentTurn(tx, r.h.now())
	})
}

// waitsForThreads reports whether the session's runner waits for its
// child threads (it must not leave while they run).
func (r *runner) waitsForThreads() bool {
	return r.kids != nil && r.kids.busy()
}
