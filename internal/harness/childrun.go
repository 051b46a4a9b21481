package harness

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// advisorSystem is the system prompt of an advisor thread.
const advisorSystem = "You are an advisor to another AI agent, which consults you with a question about its work. " +
	"Answer it directly and concisely: your whole answer is sent back to that agent."

// superviseChildren starts a runner for every child thread that has none
// and tells each to look at the log (ctx is the session runner's).
func (r *runner) superviseChildren(ctx context.Context) {
	s := r.kids
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(ctx)
	}
	for _, c := range s.list {
		k := s.runners[c.id]
		if k == nil {
			if c.status == ma.StatusTerminated {
				continue
			}
			k = &runner{h: r.h, id: r.id, wake: make(chan struct{}, 1), ended: r.ended, th: &thread{id: c.id, parent: r}}
			s.runners[c.id] = k
			s.wg.Go(func() { k.childLoop(s.ctx) })
		}
		k.signal()
	}
}

// stopChildren stops the child threads' runners and waits for them.
func (r *runner) stopChildren() {
	s := r.kids
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	s.ctx, s.cancel, s.runners = nil, nil, map[string]*runner{}
	s.mu.Unlock()
}

// interruptChildren cuts the calls in flight of the child threads' runners.
func (r *runner) interruptChildren() {
	s := r.kids
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.runners {
		k.interrupt()
		k.signal()
	}
}

// interruptChild cuts the calls in flight of the child thread id's runner
// alone (none if it has no runner yet: it reads the interrupt when it
// starts).
func (r *runner) interruptChild(id string) {
	r.mu.Lock()
	s := r.kids
	r.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.runners[id]; k != nil {
		k.interrupt()
		k.signal()
	}
}

// childLoop runs a child thread until ctx ends: a step at a time, then a
// wait for the session's runner to signal a change.
func (r *runner) childLoop(ctx context.Context) {
	defer r.endTurn(OutcomeSuspended)
	failures, outages := 0, 0
	for ctx.Err() == nil {
		more, err := r.safeStep(ctx)
		switch {
		case ctx.Err() != nil, errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrNotFound):
			return
		case errors.Is(err, errThreadMoved):
			continue
		case errors.Is(err, store.ErrUnavailable):
			outages++
			r.waitForStore(ctx, outages, err)
			continue
		case err != nil:
			failures++
			if r.childFailure(ctx, failures, err) {
				continue
			}
		case more:
			failures, outages = 0, 0
			continue
		}
		select {
		case <-r.wake:
		case <-ctx.Done():
		}
	}
}

// childFailure handles the nth consecutive failed step of a child thread:
// the first is retried from the log, the second ends the thread's turn
// (retries_exhausted). It reports whether to try again at once.
func (r *runner) childFailure(ctx context.Context, n int, err error) bool {
	r.h.log.Error("thread runner step failed", "session", r.id, "thread", r.th.id, "attempt", n, "err", err)
	r.log, r.proj = nil, nil
	if n == 1 {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return true
	}
	f := failure{errType: ma.ErrorUnknown, message: "internal error in the server (its log has the cause)"}
	if uerr := r.update(ctx, func(tx store.Tx) error {
		if err := answerCutOff(tx, ToolCutOffText, r.h.now()); err != nil {
			return err
		}
		return r.exhaust(tx, f)
	}); uerr != nil {
		r.h.log.Error("cannot record a thread's failure", "session", r.id, "thread", r.th.id, "err", uerr)
	}
	return false
}

// childStep does the next thing a child thread needs, as step does for a
// session, and reports whether there may be more to do.
func (r *runner) childStep(ctx context.Context) (bool, error) {
	gen := r.generation()
	st := r.h.cfg.Store
	if r.log == nil {
		r.log, r.proj = newLogCache(), nil
	}
	fresh, err := r.log.refresh(ctx, st, r.id)
	if err != nil {
		return false, err
	}
	if r.sess == nil || slices.ContainsFunc(fresh, func(ev ma.Event) bool { return ev.Type == ma.EventSessionUpdated }) {
		s, err := st.GetSession(ctx, r.id)
		if err != nil {
			return false, err
		}
		r.sess = &s
	}
	if r.th.agent == nil {
		row, err := st.GetThread(ctx, r.id, r.th.id)
		if err != nil {
			return false, err
		}
		r.th.agent = &row.Agent
	}
	rebuild := r.proj == nil || slices.ContainsFunc(fresh, func(ev ma.Event) bool {
		return ev.Type == ma.EventAgentContextCompacted && r.ofThread(&ev)
	})
	r.project(fresh, false, rebuild)
	r.th.status = threadStatus(r.log.live(), r.id, r.th.id)
	v := r.proj.view()
	sess := *r.sess
	sess.Status, sess.StopReason, sess.Agent = r.th.status, nil, sessionAgentOf(*r.th.agent)
	if hasInterrupt, _ := r.queued(); hasInterrupt {
		return true, r.update(ctx, func(tx store.Tx) error { return r.applyInterrupts(tx, v) })
	}
	switch sess.Status {
	case ma.StatusIdle, ma.StatusRescheduling:
		if v.turnActive() {
			aw := v.awaitingIDs()
			if len(aw) == 0 {
				return true, r.update(ctx, func(tx store.Tx) error {
					return r.setStatus(tx, ma.StatusRunning, &ma.Event{Type: ma.EventStatusRunning})
				})
			}
			if sess.Status == ma.StatusRescheduling || !slices.Equal(aw, v.lastIdleIDs) {
				return true, r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopRequiresAction, aw) })
			}
			return false, nil
		}
		if len(v.inbox) > 0 {
			return true, r.update(ctx, func(tx store.Tx) error {
				return r.setStatus(tx, ma.StatusRunning, &ma.Event{Type: ma.EventStatusRunning})
			})
		}
		return false, nil
	case ma.StatusRunning:
		if rn := v.runnable(); len(rn) > 0 {
			return true, r.runTools(ctx, gen, &sess, rn)
		}
		if aw := v.awaitingIDs(); len(aw) > 0 {
			return true, r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopRequiresAction, aw) })
		}
		if over, err := r.overBudget(ctx); over || err != nil {
			return false, err // waits for a wake after the budget changed
		}
		return true, r.callModel(ctx, gen, &sess, v)
	}
	return false, nil
}

// threadStatus returns the status of a child thread as its latest status
// event in the live events says (idle before the first).
func threadStatus(live []ma.Event, sessionID, tid string) string {
	for i := len(live) - 1; i >= 0; i-- {
		ev := &live[i]
		if ev.SessionThreadID != tid || ma.StreamThread(sessionID, ev) != tid {
			continue
		}
		switch ev.Type {
		case ma.EventThreadStatusRunning:
			return ma.StatusRunning
		case ma.EventThreadStatusIdle:
			return ma.StatusIdle
		case ma.EventThreadStatusRescheduled:
			return ma.StatusRescheduling
		case ma.EventThreadStatusTerminated:
			return ma.StatusTerminated
		}
	}
	return ma.StatusIdle
}

// sessionAgentOf is the agent a child thread's runner runs.
func sessionAgentOf(a ma.ThreadAgent) ma.SessionAgent {
	if a.Type == ma.ThreadAgentAdvisor {
		return ma.SessionAgent{Type: "agent", Name: "advisor", System: advisorSystem, Model: a.Model}
	}
	return ma.SessionAgent{ID: a.ID, Type: "agent", Name: a.Name, Description: a.Description, System: a.System, Model: a.Model,
		Tools: a.Tools, MCPServers: a.MCPServers, Skills: a.Skills, Version: a.Version}
}

// reply sends a child's answer to the primary thread, in tx: the child's
// agent.thread_message_sent and the primary's
// agent.thread_message_received.
func (r *runner) reply(tx store.Tx, answer []ma.ContentBlock) error {
	if len(answer) == 0 {
		answer = []ma.ContentBlock{{Type: "text", Text: "(the thread ended its turn without a text answer)"}}
	}
	tt, ok := tx.(*threadTx)
	if !ok || tt.row == nil {
		return errors.New("harness: a thread's reply outside its transaction")
	}
	now := r.h.now()
	sent := &ma.Event{Type: ma.EventThreadMessageSent, ProcessedAt: &now, ToSessionThreadID: ma.PrimaryThreadID(r.id), Content: answer}
	if err := tt.Append(sent); err != nil {
		return err
	}
	return tt.Tx.Append(&ma.Event{Type: ma.EventThreadMessageReceived, ProcessedAt: &now, FromSessionThreadID: r.th.id,
		FromAgentName: threadAgentName(tt.row.Agent), Content: answer})
}

// interruptThreads ends, in tx, the turn of every child thread of the
// session (an interrupt of the primary thread is one of its children's
// too): their tools cut off, their model call's span closed, each idle
// with end_turn. A no-op for a single-agent session and a child.
func (r *runner) interruptThreads(tx store.Tx) error {
	if r.kids == nil || r.th != nil {
		return nil
	}
	tt, ok := tx.(*threadTx)
	if !ok {
		return errors.New("harness: a session's interrupt outside its transaction")
	}
	now := r.h.now()
	for _, c := range r.kids.list {
		if !c.turnActive() {
			continue
		}
		ct := &threadTx{Tx: tt.Tx, sessionID: r.id}
		if err := ct.bind(&thread{id: c.id, status: c.status}); errors.Is(err, errThreadMoved) || errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if err := answerCutOff(ct, ToolCutOffText, now); err != nil {
			return err
		}
		if c.openSpan != "" {
			if err := ct.Append(spanEnd(c.openSpan, true, nil, now)); err != nil {
				return err
			}
		}
		if err := ct.Append(&ma.Event{Type: ma.EventStatusIdle, ProcessedAt: &now, StopReason: &ma.StopReason{Type: ma.StopEndTurn}}); err != nil {
			return err
		}
		if err := ct.flush(); err != nil {
			return err
		}
	}
	return nil
}
