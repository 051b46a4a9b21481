package e2e

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/reinsdev/reins/internal/app"
	ma "github.com/reinsdev/reins/managedagents"
)

// defineOutcome is a user.define_outcome with a text rubric.
func defineOutcome(description, rubric string, maxIterations int64) anthropic.BetaManagedAgentsEventParamsUnion {
	p := anthropic.BetaManagedAgentsUserDefineOutcomeEventParams{Description: description,
		Rubric: anthropic.BetaManagedAgentsUserDefineOutcomeEventParamsRubricUnion{OfText: &anthropic.BetaManagedAgentsTextRubricParams{Content: rubric}}}
	if maxIterations > 0 {
		p.MaxIterations = anthropic.Int(maxIterations)
	}
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserDefineOutcome: &p}
}

// startOutcomes starts a server whose graders beat every 50 ms.
func startOutcomes(t *testing.T) *server {
	return startWith(t, options{}, func(c *app.Config) { c.OutcomeHeartbeat = 50 * time.Millisecond })
}

// outcomeSession opens a session of a scripted agent and its stream.
func outcomeSession(t *testing.T, s *server) (*anthropic.BetaManagedAgentsSession, *stream) {
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "outcomes")
	sess := s.newSession(t, a.ID, env.ID)
	return sess, s.openStream(t, sess.ID)
}

// outcomeFrames drops the heartbeats, whose number depends on timing.
func outcomeFrames(fs []frame) []string {
	var out []string
	for _, f := range fs {
		switch f.Type {
		case ma.EventSpanOutcomeEvaluationOngoing, ma.EventSpanModelRequestStart, ma.EventSpanModelRequestEnd:
			continue
		}
		s := f.Type
		if f.Type == ma.EventSpanOutcomeEvaluationEnd {
			s += ":" + f.Result
		}
		out = append(out, s)
	}
	return out
}

func isOutcomeEnd(result string) func(frame) bool {
	return func(f frame) bool { return f.Type == ma.EventSpanOutcomeEvaluationEnd && f.Result == result }
}

// TestOutcomeRevisedThenSatisfied defines an outcome whose scripted
// grader asks for a revision, then is satisfied: the events come in the
// documented order, the grader's explanation goes back to the agent, and
// the session's outcome_evaluations show the final state.
func TestOutcomeRevisedThenSatisfied(t *testing.T) {
	s := startOutcomes(t)
	sess, st := outcomeSession(t, s)
	rubric := "The summary has a title.\n@grade-sleep 200ms\n@grade needs_revision The summary has no title.\n@grade satisfied The summary has a title now."
	echo := s.send(t, sess.ID, defineOutcome("@text Here is the summary.", rubric, 0))
	if len(echo) != 1 || !strings.HasPrefix(echo[0].OutcomeID, "outc_") || echo[0].MaxIterations == nil || *echo[0].MaxIterations != 3 ||
		!strings.Contains(string(echo[0].Rubric), `"type":"text"`) {
		t.Fatalf("echo = %+v, want an outcome_id outc_… and max_iterations 3", echo)
	}
	got := st.until(func(f frame) bool { return isIdle(f) })
	want := []string{"user.define_outcome", "session.status_running", "user.define_outcome", "agent.message",
		"span.outcome_evaluation_start", "span.outcome_evaluation_end:needs_revision",
		"agent.message", "span.outcome_evaluation_start", "span.outcome_evaluation_end:satisfied", "session.usage", "session.status_idle"}
	if g := outcomeFrames(got); !slices.Equal(g, want) {
		t.Fatalf("events = %v, want %v", g, want)
	}
	checkOutcomeSpans(t, got, echo[0].OutcomeID)
	if !slices.ContainsFunc(got, func(f frame) bool { return f.Type == ma.EventSpanOutcomeEvaluationOngoing }) {
		t.Errorf("no span.outcome_evaluation_ongoing heartbeat while the grader took 200 ms: %v", types(got))
	}
	var revised string
	for _, f := range got {
		if f.Type == ma.EventAgentMessage {
			revised = f.Content[0].Text
		}
	}
	if !strings.Contains(revised, "The summary has no title.") {
		t.Errorf("the agent's revision %q does not answer the grader's explanation", revised)
	}
	if idle := got[len(got)-1]; idle.StopReason == nil || idle.StopReason.Type != "end_turn" {
		t.Errorf("idle = %+v, want end_turn", idle.StopReason)
	}
	evals := outcomeEvaluations(t, s, sess.ID)
	if len(evals) != 1 || evals[0].OutcomeID != echo[0].OutcomeID || evals[0].Result != "satisfied" || evals[0].Iteration != 1 ||
		evals[0].Explanation != "The summary has a title now." || evals[0].CompletedAt.IsZero() || evals[0].Description != "@text Here is the summary." {
		t.Fatalf("outcome_evaluations = %+v", evals)
	}
}

// checkOutcomeSpans checks the spans' fields: iterations 0 and 1, each end
// naming its start, with the grader's usage.
func checkOutcomeSpans(t *testing.T, got []frame, outcomeID string) {
	t.Helper()
	starts := map[string]int64{}
	n := int64(0)
	for _, f := range got {
		switch f.Type {
		case ma.EventSpanOutcomeEvaluationStart:
			if f.OutcomeID != outcomeID || f.Iteration == nil || *f.Iteration != n {
				t.Fatalf("start = %+v, want outcome %s iteration %d", f.Event, outcomeID, n)
			}
			starts[f.ID] = n
		case ma.EventSpanOutcomeEvaluationOngoing:
			if f.OutcomeID != outcomeID || f.Iteration == nil {
				t.Fatalf("ongoing = %+v", f.Event)
			}
		case ma.EventSpanOutcomeEvaluationEnd:
			it, ok := starts[f.OutcomeEvaluationStartID]
			if !ok || f.Iteration == nil || *f.Iteration != it || !strings.Contains(string(f.Usage), `"input_tokens":`) || strings.Contains(string(f.Usage), `"input_tokens":0`) || f.Explanation == nil {
				t.Fatalf("end = %+v, want the end of a start seen (%v) with usage", f.Event, starts)
			}
			n++
		}
	}
}

// outcomeEvaluations reads the session's outcome_evaluations with the SDK.
func outcomeEvaluations(t *testing.T, s *server, id string) []anthropic.BetaManagedAgentsOutcomeEvaluationResource {
	t.Helper()
	got, err := s.client.Beta.Sessions.Get(context.Background(), id, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	return got.OutcomeEvaluations
}

// TestOutcomeMaxIterationsReached: a grader that always asks for a
// revision ends the outcome after max_iterations evaluations, and the
// agent gets one turn to acknowledge.
func TestOutcomeMaxIterationsReached(t *testing.T) {
	s := startOutcomes(t)
	sess, st := outcomeSession(t, s)
	s.send(t, sess.ID, defineOutcome("@text Draft.", "@grade needs_revision Still missing the conclusion.", 2))
	got := st.until(isIdle)
	want := []string{"user.define_outcome", "session.status_running", "user.define_outcome", "agent.message",
		"span.outcome_evaluation_start", "span.outcome_evaluation_end:needs_revision",
		"agent.message", "span.outcome_evaluation_start", "span.outcome_evaluation_end:max_iterations_reached",
		"agent.message", "session.usage", "session.status_idle"}
	if g := outcomeFrames(got); !slices.Equal(g, want) {
		t.Fatalf("events = %v, want %v", g, want)
	}
	evals := outcomeEvaluations(t, s, sess.ID)
	if len(evals) != 1 || evals[0].Result != "max_iterations_reached" || evals[0].Iteration != 1 || evals[0].CompletedAt.IsZero() {
		t.Fatalf("outcome_evaluations = %+v", evals)
	}
	// The outcome ended: the next one is accepted.
	s.send(t, sess.ID, defineOutcome("@text Second.", "fine", 1))
	st.until(isOutcomeEnd("satisfied"))
}

// TestOutcomeInterruptedWhileGrading interrupts the grader: the
// evaluation ends interrupted and the session goes idle.
func TestOutcomeInterruptedWhileGrading(t *testing.T) {
	s := startOutcomes(t)
	sess, st := outcomeSession(t, s)
	s.send(t, sess.ID, defineOutcome("@text Done.", "@grade-sleep 30s\n@grade satisfied ok", 0))
	st.until(func(f frame) bool { return f.Type == ma.EventSpanOutcomeEvaluationOngoing })
	s.send(t, sess.ID, interruptEvent())
	got := st.until(isIdle)
	var end *frame
	for i := range got {
		if got[i].Type == ma.EventSpanOutcomeEvaluationEnd {
			end = &got[i]
		}
	}
	if end == nil || end.Result != "interrupted" {
		t.Fatalf("events after the interrupt = %v, want span.outcome_evaluation_end interrupted", types(got))
	}
	evals := outcomeEvaluations(t, s, sess.ID)
	if len(evals) != 1 || evals[0].Result != "interrupted" || evals[0].CompletedAt.IsZero() {
		t.Fatalf("outcome_evaluations = %+v", evals)
	}
}

// TestOutcomeOneAtATime: a second outcome while the first has not ended
// is refused with a 400 naming the first.
func TestOutcomeOneAtATime(t *testing.T) {
	s := startOutcomes(t)
	sess, st := outcomeSession(t, s)
	first := s.send(t, sess.ID, defineOutcome("@text Done.", "@grade-sleep 30s", 0))
	_, err := s.client.Beta.Sessions.Events.Send(context.Background(), sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{defineOutcome("another", "r", 0)}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), first[0].OutcomeID) {
		t.Fatalf("second define_outcome: %v, want a 400 naming %s", err, first[0].OutcomeID)
	}
	// Two in one request: the second is refused too, and nothing is sent.
	s.send(t, sess.ID, interruptEvent())
	st.until(isIdle)
	_, err = s.client.Beta.Sessions.Events.Send(context.Background(), sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{defineOutcome("a", "r", 0), defineOutcome("b", "r", 0)}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "events[1]") {
		t.Fatalf("two define_outcome in one request: %v, want a 400 on events[1]", err)
	}
	if evals := outcomeEvaluations(t, s, sess.ID); len(evals) != 1 {
		t.Fatalf("outcome_evaluations = %+v, want the first outcome only", evals)
	}
}

// TestOutcomeFileRubric defines an outcome in a session's initial_events
// with a file rubric: the echo carries the file's text, and the scripted
// grader reads its directives there. A file that does not exist is a 404,
// a binary file a 400.
func TestOutcomeFileRubric(t *testing.T) {
	s := startOutcomes(t)
	ctx := context.Background()
	rubric := "The answer says done.\n@grade needs_revision Say it louder.\n@grade satisfied Loud enough.\n"
	f, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader(rubric), "rubric.md", "text/markdown")})
	if err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "outcomes")
	fileRubric := func(id string) anthropic.BetaSessionNewParams {
		return anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID,
			InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserDefineOutcome: &anthropic.BetaManagedAgentsUserDefineOutcomeEventParams{
				Description: "@text done", Rubric: anthropic.BetaManagedAgentsUserDefineOutcomeEventParamsRubricUnion{OfFile: &anthropic.BetaManagedAgentsFileRubricParams{FileID: id}}}}}}
	}
	_, err = s.client.Beta.Sessions.New(ctx, fileRubric("file_missing"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.Error(), "initial_events[0].rubric.file_id") {
		t.Fatalf("a missing rubric file: %v, want a 404 naming initial_events[0].rubric.file_id", err)
	}
	bin, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("\x89PNG"), "r.png", "image/png")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = s.client.Beta.Sessions.New(ctx, fileRubric(bin.ID)); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("an image rubric file: %v, want a 400", err)
	}
	sess, err := s.client.Beta.Sessions.New(ctx, fileRubric(f.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(sess.OutcomeEvaluations) != 1 || sess.OutcomeEvaluations[0].Result != "pending" && sess.OutcomeEvaluations[0].Result != "running" {
		t.Fatalf("new session's outcome_evaluations = %+v, want one pending", sess.OutcomeEvaluations)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		evals := outcomeEvaluations(t, s, sess.ID)
		if evals[0].Result == "satisfied" && evals[0].Iteration == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outcome_evaluations = %+v, want satisfied at iteration 1", evals)
		}
		time.Sleep(50 * time.Millisecond)
	}
	list, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Data {
		if ev.Type == "user.define_outcome" {
			d := ev.AsUserDefineOutcome()
			if d.Rubric.Type != "text" || d.Rubric.Content != rubric || d.MaxIterations != 3 {
				t.Fatalf("define_outcome echo rubric = %+v, want the file's text", d.Rubric)
			}
			return
		}
	}
	t.Fatal("no user.define_outcome in the session's events")
}

// TestOutcomeRegradedAfterRestart stops the server while the grader
// works: the next server grades the outcome again from the log, and the
// log holds one start and one end.
func TestOutcomeRegradedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	adjust := func(c *app.Config) { c.OutcomeHeartbeat = 50 * time.Millisecond }
	s, stop := startStoppable(t, options{dir: dir}, adjust)
	sess, st := outcomeSession(t, s)
	s.send(t, sess.ID, defineOutcome("@text Done.", "@grade-sleep 1s\n@grade satisfied ok", 0))
	st.until(func(f frame) bool { return f.Type == ma.EventSpanOutcomeEvaluationOngoing })
	stop()

	s2 := startWith(t, options{dir: dir}, adjust)
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := s2.client.Beta.Sessions.Get(context.Background(), sess.ID, anthropic.BetaSessionGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == "idle" {
			if len(got.OutcomeEvaluations) != 1 || got.OutcomeEvaluations[0].Result != "satisfied" {
				t.Fatalf("outcome_evaluations = %+v, want satisfied", got.OutcomeEvaluations)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still %s after the restart", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	list, err := s2.client.Beta.Sessions.Events.List(context.Background(), sess.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ev := range list.Data {
		count[ev.Type]++
	}
	if count["span.outcome_evaluation_start"] != 1 || count["span.outcome_evaluation_end"] != 1 || count["session.status_idle"] != 1 {
		t.Fatalf("event counts %v, want one start, one end, one idle", count)
	}
}
