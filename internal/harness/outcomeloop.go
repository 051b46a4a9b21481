package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/outcomes"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// OutcomeConfig configures the evaluation of outcomes
// (user.define_outcome): when the agent ends its turn on an outcome, a
// grader, a model call of its own, judges the work against the rubric.
type OutcomeConfig struct {
	// GraderModel is the grader's model id ("": the session's model).
	GraderModel string
	// Heartbeat is the interval of span.outcome_evaluation_ongoing
	// while the grader works (default 5 s).
	Heartbeat time.Duration
	// Outputs, if set, lists and reads the session's output files for
	// the grader.
	Outputs OutputFiles
}

// defaultHeartbeat is OutcomeConfig.Heartbeat's default.
const defaultHeartbeat = 5 * time.Second

// endTurn records the end of the agent's turn: on an outcome, its
// evaluation starts (the session stays running); otherwise the session
// goes idle.
func (r *runner) endAgentTurn(tx store.Tx, now string) error {
	if a := r.activeOutcome(); a != nil && !a.Evaluating() {
		it := a.Iteration
		return tx.Append(&ma.Event{Type: ma.EventSpanOutcomeEvaluationStart, OutcomeID: a.Define.OutcomeID, Iteration: &it, ProcessedAt: &now})
	}
	return r.idle(tx, ma.StopEndTurn, nil)
}

// activeOutcome returns the outcome the log says the agent works on.
func (r *runner) activeOutcome() *outcomes.Active {
	if r.proj == nil {
		return nil
	}
	return r.proj.v.outcome.Active()
}

// gradeResult is the outcome of a grader's work: a verdict and the usage
// of all its model calls.
type gradeResult struct {
	verdict outcomes.Verdict
	model   string // the grader's model
	usage   model.Usage
	err     error // ctx ended
}

// evaluate runs the grader on the outcome the log says is being
// evaluated (a span.outcome_evaluation_start without end; after a crash
// it is graded again), appends a span.outcome_evaluation_ongoing every
// Heartbeat meanwhile, and records the verdict. An interrupt cuts it
// short; the next step reads the interrupt and ends the evaluation
// interrupted.
func (r *runner) evaluate(ctx context.Context, gen uint64, sess *ma.Session, a *outcomes.Active) error {
	oc := r.h.cfg.Outcomes
	outputs, err := describeOutputs(ctx, oc.Outputs, sess.ID)
	if err != nil {
		return err
	}
	modelID := oc.GraderModel
	if modelID == "" {
		modelID = sess.Agent.Model.ID
	}
	prompt := graderPrompt(a, rubricText(a.Define), outputs)
	every := oc.Heartbeat
	if every <= 0 {
		every = defaultHeartbeat
	}
	tctx, done := r.turnContext(ctx, gen)
	defer done()
	results := make(chan gradeResult, 1)
	go func() { results <- r.grade(tctx, modelID, sess.ID, prompt) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case g := <-results:
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case g.err != nil:
				return nil // interrupted: the next step reads the interrupt
			}
			return r.update(ctx, func(tx store.Tx) error { return r.recordVerdict(tx, a, g) })
		case <-tick.C:
			it := a.Iteration
			err := r.update(ctx, func(tx store.Tx) error {
				now := r.h.now()
				return tx.Append(&ma.Event{Type: ma.EventSpanOutcomeEvaluationOngoing, OutcomeID: a.Define.OutcomeID, Iteration: &it, ProcessedAt: &now})
			})
			if err != nil {
				return err // done cancels the grader
			}
		}
	}
}

// grade asks the grader for a verdict: model failures are retried per the
// retry policy, a reply that is not a verdict is asked again once; then
// the verdict is failed, saying why. err is set only when ctx ended.
func (r *runner) grade(ctx context.Context, modelID, sessionID, prompt string) gradeResult {
	g := gradeResult{model: modelID}
	var retry *graderRetry
	policy := r.h.cfg.Retry
	for attempt := 1; ; {
		resp, err := r.h.cfg.Model.Stream(ctx, graderRequest(modelID, sessionID, prompt, retry), model.DiscardSink{})
		if ctx.Err() != nil {
			g.err = ctx.Err()
			return g
		}
		if err != nil {
			f := classify(err)
			r.h.log.Warn("grader call failed", "session", sessionID, "attempt", attempt, "type", f.errType, "err", err)
			if !f.retryable || attempt >= policy.MaxAttempts {
				g.verdict = outcomes.Verdict{Result: ma.OutcomeFailed, Explanation: "the grader's model call failed: " + f.message}
				return g
			}
			if err := sleepCtx(ctx, policy.Delay(attempt, f.retryAfter)); err != nil {
				g.err = err
				return g
			}
			attempt++
			continue
		}
		addUsage(&g.usage, resp.Usage)
		reply := strings.TrimSpace(blocksText(resp.Content))
		v, perr := outcomes.ParseVerdict(reply)
		switch {
		case perr == nil:
			g.verdict = v
			return g
		case retry != nil:
			g.verdict = outcomes.Verdict{Result: ma.OutcomeFailed, Explanation: outcomes.Cut("the grader did not answer with a verdict: "+perr.Error(), outcomes.MaxExplanation)}
			return g
		}
		if reply == "" {
			reply = "(empty reply)"
		}
		retry = &graderRetry{reply: outcomes.Cut(reply, graderAnswerBytes), err: perr}
	}
}

// recordVerdict appends the span.outcome_evaluation_end of a verdict and
// what follows it: needs_revision sends the agent back to work (with the
// messages queued meanwhile), on the last iteration it is
// max_iterations_reached and the agent gets one turn to acknowledge;
// satisfied and failed end the turn.
func (r *runner) recordVerdict(tx store.Tx, a *outcomes.Active, g gradeResult) error {
	now := r.h.now()
	result := g.verdict.Result
	if result == ma.OutcomeNeedsRevision && a.Iteration+1 >= a.MaxIterations() {
		result = ma.OutcomeMaxIterationsReached
	}
	u := g.usage
	usage := &ma.ModelUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens, CacheReadInputTokens: u.CacheReadInputTokens}
	addSessionUsage(tx.Session(), u, now)
	r.meter(tx.Session(), g.model, u, now)
	if err := tx.Append(evaluationEnd(a, result, g.verdict.Explanation, usage, now)); err != nil {
		return err
	}
	r.h.log.Debug("outcome evaluated", "session", r.id, "outcome", a.Define.OutcomeID, "iteration", a.Iteration, "result", result)
	switch result {
	case ma.OutcomeNeedsRevision:
		return steer(tx, now)
	case ma.OutcomeMaxIterationsReached:
		return nil // the next step calls the model for the acknowledgement
	}
	return r.idle(tx, ma.StopEndTurn, nil)
}

// interruptEvaluation ends an evaluation an interrupt cut short.
func interruptEvaluation(tx store.Tx, v *view, now string) error {
	a := v.outcome.Active()
	if a == nil || !a.Evaluating() {
		return nil
	}
	return tx.Append(evaluationEnd(a, ma.OutcomeInterrupted, "the user interrupted the evaluation", &ma.ModelUsage{}, now))
}

// evaluationEnd is the span.outcome_evaluation_end of the evaluation a is
// under.
func evaluationEnd(a *outcomes.Active, result, explanation string, usage *ma.ModelUsage, now string) *ma.Event {
	it := a.Iteration
	u, _ := json.Marshal(usage)
	return &ma.Event{Type: ma.EventSpanOutcomeEvaluationEnd, OutcomeEvaluationStartID: a.StartID, OutcomeID: a.Define.OutcomeID,
		Iteration: &it, Result: result, Explanation: &explanation, Usage: u, ProcessedAt: &now}
}

// steer consumes the user and system messages queued while the agent
// worked on the outcome: they join the grader's explanation as the input
// of the next cycle. An interrupt or another outcome behind them stays
// queued.
func steer(tx store.Tx, now string) error {
	pending, err := tx.Pending()
	if err != nil {
		return err
	}
	for i := range pending {
		if t := pending[i].Type; t != ma.EventUserMessage && t != ma.EventSystemMessage {
			break
		}
		pending[i].ProcessedAt = &now
		if err := tx.Append(&pending[i]); err != nil {
			return err
		}
	}
	return nil
}

// addSessionUsage adds a model call's usage to the session's totals.
func addSessionUsage(s *ma.Session, u model.Usage, now string) {
	s.Usage.InputTokens += u.InputTokens
	s.Usage.OutputTokens += u.OutputTokens
	s.Usage.CacheReadInputTokens += u.CacheReadInputTokens
	s.Usage.CacheCreation.Ephemeral5mInputTokens += u.CacheCreationInputTokens
	s.UpdatedAt = now
}

func addUsage(sum *model.Usage, u model.Usage) {
	sum.InputTokens += u.InputTokens
	sum.OutputTokens += u.OutputTokens
	sum.CacheCreationInputTokens += u.CacheCreationInputTokens
	sum.CacheReadInputTokens += u.CacheReadInputTokens
}

// blocksText joins a response's text blocks.
func blocksText(blocks []model.Block) string {
	var b strings.Builder
	for _, x := range blocks {
		if x.Type == model.BlockText {
			b.WriteString(x.Text)
		}
	}
	return b.String()
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// outcomeTaskText introduces an outcome's description to the agent.
const outcomeTaskText = "You are working on an outcome. When you end your turn, a grader checks your final answer and the files under /mnt/session/outputs against a rubric; if the work does not satisfy it yet, you will be told what to revise. The task:"

// transcribeOutcome adds what an outcome's events say to the agent: its
// description when it starts, the grader's explanation when it asks for
// a revision, the request to acknowledge when the iterations are spent.
func (p *projector) transcribeOutcome(ev ma.Event) {
	switch {
	case ev.Type == ma.EventUserDefineOutcome && ev.ProcessedAt != nil:
		p.closeOpen()
		p.tb.add(model.RoleUser, model.Block{Type: model.BlockText, Text: outcomeTaskText},
			model.Block{Type: model.BlockText, Text: ev.Description})
	case ev.Type != ma.EventSpanOutcomeEvaluationEnd || ev.Explanation == nil:
	case ev.Result == ma.OutcomeNeedsRevision:
		p.tb.add(model.RoleUser, model.Block{Type: model.BlockText, Text: fmt.Sprintf(
			"The grader evaluated your work (iteration %d) and asks for a revision. Revise the work, then end your turn. The grader's explanation:", iterationOf(ev))},
			model.Block{Type: model.BlockText, Text: *ev.Explanation})
	case ev.Result == ma.OutcomeMaxIterationsReached:
		p.tb.add(model.RoleUser, model.Block{Type: model.BlockText, Text: fmt.Sprintf(
			"The grader still asks for a revision after iteration %d, the last one this outcome allows: the work stops here and is not evaluated again. In one short message, tell the user what is done and what is missing. The grader's explanation:", iterationOf(ev))},
			model.Block{Type: model.BlockText, Text: *ev.Explanation})
	}
}

func iterationOf(ev ma.Event) int64 {
	if ev.Iteration == nil {
		return 0
	}
	return *ev.Iteration
}
