package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// threadButton is the selector of a thread's button in the tree.
func threadButton(id string) string { return fmt.Sprintf(`.threads button[data-thread-id=%q]`, id) }

// TestConsoleThreads: a session with a child thread, written as a runner
// would. The tree shows the primary thread and the child under it with
// their status, following the session's stream; the messages between the
// threads, the child's status changes and its tool call that needs
// approval (labelled with the thread) are in the session's transcript;
// picking the child shows its own transcript from its stream, and picking
// the primary the session's again.
func TestConsoleThreads(t *testing.T) {
	s := start(t, options{})
	ctx, tb := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	primary := ma.PrimaryThreadID(sess.ID)

	// An ordinary session shows no tree.
	run(t, ctx, "open", chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".conn", "live")))
	if evalJS[bool](t, ctx, shown(".threads")) {
		t.Fatal("the thread tree shows for a session without child threads")
	}
	child := s.childThread(t, sess.ID)
	run(t, ctx, "the child appears",
		waitJS(shown(".threads")),
		waitJS(textIn(threadButton(primary), "test agent")), waitJS(textIn(threadButton(primary), "idle")),
		waitJS(textIn(fmt.Sprintf(`.threads ul.tree ul.tree button[data-thread-id=%q]`, child.ID), "researcher")),
		waitJS(textIn(threadButton(child.ID), "running")),
		waitJS(textIn(".transcript .ev.sys", "Thread researcher started")))

	now := ma.Time(time.Now())
	text := func(s string) []ma.ContentBlock { return []ma.ContentBlock{{Type: "text", Text: s}} }
	idle := ma.ThreadStatus(ma.EventThreadStatusIdle, child.ID, "researcher", &ma.StopReason{Type: ma.StopEndTurn})
	evs := []*ma.Event{
		{Type: ma.EventThreadMessageSent, ToSessionThreadID: child.ID, ToAgentName: "researcher", Content: text("Find the figures."), ProcessedAt: &now},
		{Type: ma.EventThreadMessageReceived, FromSessionThreadID: primary, Content: text("Find the figures."), SessionThreadID: child.ID, ProcessedAt: &now},
		{Type: ma.EventAgentToolUse, Name: "bash", Input: ma.Raw(`{"command":"grep -c figure notes"}`), EvaluatedPermission: "allow", SessionThreadID: child.ID, ProcessedAt: &now},
		{Type: ma.EventAgentToolUse, Name: "bash", Input: ma.Raw(`{"command":"rm notes"}`), EvaluatedPermission: "ask", SessionThreadID: child.ID, ProcessedAt: &now},
		{Type: ma.EventAgentMessage, Content: text("The answer is 42."), SessionThreadID: child.ID, ProcessedAt: &now},
		{Type: ma.EventThreadMessageSent, ToSessionThreadID: primary, Content: text("The answer is 42."), SessionThreadID: child.ID, ProcessedAt: &now},
		&idle,
		{Type: ma.EventThreadMessageReceived, FromSessionThreadID: child.ID, FromAgentName: "researcher", Content: text("The answer is 42."), ProcessedAt: &now},
	}
	s.runnerWrites(t, sess.ID, func(tx store.Tx) error { return tx.Append(evs...) })
	run(t, ctx, "the session's transcript",
		waitJS(textIn(threadButton(child.ID), "idle")),
		waitJS(textIn(".transcript .ev.thread-msg.sent", "To researcher")),
		waitJS(textIn(".transcript .ev.thread-msg.received", "From researcher")),
		waitJS(textIn(".transcript .ev.thread-msg.received .md", "The answer is 42.")),
		waitJS(textIn(".transcript .thread-status", "Thread researcher: idle (end turn)")),
		waitJS(textIn(".transcript .ev.tool .who", "Tool bash · thread researcher")))
	if evalJS[bool](t, ctx, textIn(".transcript .ev.tool", "grep -c figure")) {
		t.Error("the child's own tool call is in the session's transcript")
	}

	run(t, ctx, "pick the child",
		chromedp.Click(chromedp.CSS(threadButton(child.ID))),
		waitJS(shown(".thread-view")), waitJS(`!`+shown(`ol.transcript[aria-label="Transcript"]`)),
		waitJS(textIn(".thread-view h2", "Thread researcher")),
		waitJS(textIn(".thread-view .ev.thread-msg.received", "From primary")),
		waitJS(textIn(".thread-view .ev.tool", "grep -c figure notes")),
		waitJS(textIn(".thread-view .ev.agent .md", "The answer is 42.")),
		waitJS(textIn(".thread-view .ev.thread-msg.sent", "To primary")),
		waitJS(textIn(".thread-view .thread-status", "idle (end turn)")),
		waitJS(textIn(".thread-view .conn", "live")))
	if got := evalJS[string](t, ctx, `document.querySelector(`+fmt.Sprintf("%q", threadButton(child.ID))+`).getAttribute("aria-pressed")`); got != "true" {
		t.Errorf("the child's button: aria-pressed %q", got)
	}
	shot(t, ctx, "threads")

	run(t, ctx, "pick the primary",
		chromedp.Click(chromedp.CSS(threadButton(primary))),
		waitJS(`!`+shown(".thread-view")), waitJS(shown(`ol.transcript[aria-label="Transcript"]`)))
	settled(t, ctx, tb, "session with threads")
}

// TestConsoleOutcomes: an outcome the scripted grader sends back once
// (needs_revision), then accepts (satisfied): the outcomes panel shows
// both evaluations with their iteration, verdict, explanation and the
// grader's usage, and the outcome's state from the session's
// outcome_evaluations; the page opened afterwards shows the same.
func TestConsoleOutcomes(t *testing.T) {
	s := startOutcomes(t)
	ctx, tb := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "outcomes").ID)
	run(t, ctx, "open", chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".conn", "live")))
	if evalJS[bool](t, ctx, shown("section.outcomes")) {
		t.Fatal("the outcomes panel shows for a session without outcomes")
	}
	rubric := "The summary has a title.\n@grade-sleep 200ms\n@grade needs_revision The summary has no title.\n@grade satisfied The summary has a title now."
	echo := s.send(t, sess.ID, defineOutcome("@text Here is the summary.", rubric, 0))
	outcome := fmt.Sprintf(`section.outcomes li.outcome[data-outcome-id=%q]`, echo[0].OutcomeID)
	eval := func(i int) string { return fmt.Sprintf(`%s li.eval[data-iteration="%d"]`, outcome, i) }
	check := func(what string) {
		run(t, ctx, what,
			waitJS(shown("section.outcomes")),
			waitJS(textIn(outcome, "@text Here is the summary.")),
			waitJS(textIn(eval(0), "Iteration 0")), waitJS(textIn(eval(0)+" .badge.o-needs_revision", "needs revision")),
			waitJS(textIn(eval(0)+" .explanation", "The summary has no title.")), waitJS(textIn(eval(0)+" .usage", "out tokens")),
			waitJS(textIn(eval(1), "Iteration 1")), waitJS(textIn(eval(1)+" .badge.o-satisfied", "satisfied")),
			waitJS(textIn(eval(1)+" .explanation", "The summary has a title now.")), waitJS(textIn(eval(1)+" .usage", "Grader:")),
			waitJS(textIn(outcome+" .state", "satisfied · iteration 1")),
			waitJS(textIn(".stop", "end turn")))
		if n := evalJS[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, outcome+" li.eval")); n != 2 {
			t.Errorf("%s: %d evaluations shown, want 2", what, n)
		}
	}
	check("evaluated live")
	shot(t, ctx, "outcomes")
	run(t, ctx, "reopen", chromedp.Navigate(base+"#/sessions"), waitJS(textIn("main h1", "Sessions")),
		chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".conn", "live")))
	check("reopened")
	settled(t, ctx, tb, "session with an outcome")
}
