import sys
p='internal/harness/runner.go'
s=open(p).read()
def rep(old,new,cnt=1):
    global s
    n=s.count(old)
    if n!=cnt:
        print("MISMATCH",n,repr(old[:70])); return
    s=s.replace(old,new)
rep("""	turn *turnObs // the observation of the turn in progress, if any
	obs  txObs    // what the current transaction leaves to report
""","""	turn *turnObs // the observation of the turn in progress, if any
	obs  txObs    // what the current transaction leaves to report

	// th is set on the runner of a child thread (see threads.go); kids on
	// the session runner of a multi-agent session (set under mu).
	th       *thread
	kids     *threadSet
	txStatus string // a child's status as its last transaction left it
""")
rep("""	r.gen++
	if r.cancelTurn != nil {
		r.cancelTurn()
	}
}""","""	r.gen++
	if r.cancelTurn != nil {
		r.cancelTurn()
	}
	r.interruptChildren()
}""")
rep("""func (r *runner) release() {
	r.endTurn(OutcomeSuspended)""","""func (r *runner) release() {
	r.stopChildren()
	r.endTurn(OutcomeSuspended)""")
rep("""	d := r.h.cfg.IdleLinger
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)""","""	d := r.h.cfg.IdleLinger
	if r.waitsForThreads() {
		d = 24 * time.Hour // a child's write wakes it
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)""")
rep("""	s, err := r.h.cfg.Writer.Update(ctx, r.id, r.guard(r.observed(func(tx store.Tx) error {
		now := r.h.now()""","""	s, err := r.h.cfg.Writer.Update(ctx, r.id, r.guard(r.observed(r.inThread(func(tx store.Tx) error {
		now := r.h.now()""")
rep("""			return r.setStatus(tx, ma.StatusTerminated, &ma.Event{Type: ma.EventStatusTerminated})
		}
	})))""","""			return r.setStatus(tx, ma.StatusTerminated, &ma.Event{Type: ma.EventStatusTerminated})
		}
	}))))""")
rep("""	s, err := r.h.cfg.Writer.Update(ctx, r.id, r.guard(r.observed(fn)))
	if err == nil {
		r.sess = &s""","""	s, err := r.h.cfg.Writer.Update(ctx, r.id, r.guard(r.observed(r.inThread(fn))))
	if err == nil {
		r.wrote(&s)
		r.sess = &s""")
rep("""func (r *runner) step(ctx context.Context) (bool, error) {
	gen := r.generation()""","""func (r *runner) step(ctx context.Context) (bool, error) {
	if r.th != nil {
		return r.childStep(ctx)
	}
	gen := r.generation()""")
rep("""	sess := *r.sess
	r.observeStatus(sess.Status, "") // a turn an earlier runner left""","""	if err := r.initThreads(); err != nil {
		return false, err
	}
	sess := *r.sess
	r.observeStatus(sess.Status, "") // a turn an earlier runner left""")
rep("""	hasInterrupt, hasInput := r.log.queued()
	client, present := false, true""","""	hasInterrupt, hasInput := r.queued()
	client, present := false, true""")
rep("""	if r.proj == nil || r.projClient != client || slices.ContainsFunc(fresh, func(ev ma.Event) bool { return ev.Type == ma.EventAgentContextCompacted }) {
		r.proj, r.projClient = projectAll(r.log.live(), client), client
	} else {
		for _, ev := range fresh {
			r.proj.feed(ev)
		}
	}
	v := r.proj.view()
""","""	r.project(fresh, client, r.proj == nil || r.projClient != client || slices.ContainsFunc(fresh, func(ev ma.Event) bool { return ev.Type == ma.EventAgentContextCompacted }))
	v := r.proj.view()
	if r.kids != nil {
		r.superviseChildren(ctx)
		hasInput = hasInput || len(v.inbox) > 0
	}
""")
rep("""		if v.turnActive() {
			aw := v.awaitingIDs()
			if len(aw) == 0 {
				return true, r.update(ctx, func(tx store.Tx) error {""","""		if v.turnActive() {
			aw := r.awaitingIDs(v)
			if len(aw) == 0 {
				return true, r.update(ctx, func(tx store.Tx) error {""")
rep("""		if aw := v.awaitingIDs(); len(aw) > 0 {
			if needWorker {
				return true, r.waitForWorker(ctx, &sess)
			}
			return true, r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopRequiresAction, aw) })
		}
		if r.h.cfg.AgentEnds""","""		if aw := v.awaitingIDs(); len(aw) > 0 {
			if needWorker {
				return true, r.waitForWorker(ctx, &sess)
			}
			aw = r.awaitingIDs(v)
			return true, r.update(ctx, func(tx store.Tx) error { return r.idle(tx, ma.StopRequiresAction, aw) })
		}
		if r.kids != nil && v.answered {
			return r.coordinate(ctx)
		}
		if r.h.cfg.AgentEnds""")
rep("""	consumed := turnInputs(pending)
	if len(consumed) == 0 {
		return nil
	}""","""	consumed := turnInputs(pending)
	if len(consumed) == 0 && (r.proj == nil || len(r.proj.view().inbox) == 0) {
		return nil
	}""")
rep("""		pending[i].ProcessedAt = &now
		if err := tx.Append(&pending[i]); err != nil {
			return err
		}
	}
	if st := tx.Session().Status;""","""		pending[i].ProcessedAt = &now
		if err := tx.Append(&pending[i]); err != nil {
			return err
		}
	}
	if err := r.interruptThreads(tx); err != nil {
		return err
	}
	if st := tx.Session().Status;""")
rep("""	if uses == 0 && resp.StopReason != model.StopPauseTurn {
		return r.idle(tx, ma.StopEndTurn, nil)
	}""","""	if uses == 0 && resp.StopReason != model.StopPauseTurn {
		return r.turnEnds(tx, blocksToContent(resp.Content))
	}""")
rep("""	plan := planTools(&sess.Agent)
	req := &model.Request{""","""	plan := planTools(&sess.Agent)
	r.planDelegation(plan)
	req := &model.Request{""")
rep("""compaction(r.log.live(), window)""","""compaction(r.liveEvents(), window)""")
rep("""		return u.Event.Type == ma.EventAgentToolUse && u.Event.Name != toolset.WebFetch // run here, not placed
	})""","""		return u.Event.Type == ma.EventAgentToolUse && u.Event.Name != toolset.WebFetch && !r.isDelegation(u) // run here, not placed
	})""")
rep("""	for _, u := range uses {
		if u.Event.Type == ma.EventAgentMCPToolUse {""","""	for _, u := range uses {
		if r.isDelegation(u) {
			if err := r.delegate(ctx, u); err != nil {
				return err
			}
			continue
		}
		if u.Event.Type == ma.EventAgentMCPToolUse {""")
open(p,'w').write(s)
