package outcomes

import (
	"strings"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

func TestParseVerdict(t *testing.T) {
	for _, tc := range []struct {
		reply, result, err string
	}{
		{`{"result":"satisfied","explanation":"all met"}`, "satisfied", ""},
		{"  ```json\n{\"result\":\"needs_revision\",\"explanation\":\"add a title\"}\n```  ", "needs_revision", ""},
		{"```\n{\"result\":\"failed\",\"explanation\":\"contradiction\"}\n```", "failed", ""},
		{`{"result":"max_iterations_reached","explanation":"x"}`, "", "result must be"},
		{`{"result":"satisfied","explanation":"  "}`, "", "explanation must not be empty"},
		{`{"result":"satisfied","explanation":"ok","score":3}`, "", "unknown field"},
		{`{"result":"satisfied","explanation":"ok"} and more`, "", "more than the verdict"},
		{`Sure! {"result":"satisfied","explanation":"ok"}`, "", "not the verdict object"},
		{"```json\n{\"result\":\"satisfied\",\"explanation\":\"ok\"}", "", "does not close"},
		{"", "", "empty"},
	} {
		v, err := ParseVerdict(tc.reply)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseVerdict(%q) = %+v, %v; want an error with %q", tc.reply, v, err, tc.err)
			}
			continue
		}
		if err != nil || v.Result != tc.result || v.Explanation == "" {
			t.Errorf("ParseVerdict(%q) = %+v, %v; want %s", tc.reply, v, err, tc.result)
		}
	}
	long := `{"result":"failed","explanation":"` + strings.Repeat("é", MaxExplanation) + `"}`
	if v, err := ParseVerdict(long); err != nil || len(v.Explanation) > MaxExplanation+len("…") || !strings.HasSuffix(v.Explanation, "…") {
		t.Errorf("a long explanation is kept at %d bytes (%v), want it cut to %d", len(v.Explanation), err, MaxExplanation)
	}
}

func at(s string) *string { return &s }
func it(n int64) *int64   { return &n }

// outcomeLog is a log of one outcome: defined, revised once, satisfied.
func outcomeLog() []ma.Event {
	define := ma.Event{Type: ma.EventUserDefineOutcome, ID: "sevt_d", OutcomeID: "outc_1", Description: "write it", MaxIterations: it(3)}
	processed := define
	processed.ProcessedAt = at("t2")
	return []ma.Event{
		define,
		{Type: ma.EventStatusRunning, ProcessedAt: at("t2")},
		processed,
		{Type: ma.EventSpanModelRequestStart, ID: "sevt_m1", ProcessedAt: at("t3")},
		{Type: ma.EventAgentMessage, ProcessedAt: at("t4"), Content: []ma.ContentBlock{{Type: "text", Text: "draft"}}},
		{Type: ma.EventSpanOutcomeEvaluationStart, ID: "sevt_s0", OutcomeID: "outc_1", Iteration: it(0), ProcessedAt: at("t4")},
		{Type: ma.EventSpanOutcomeEvaluationOngoing, OutcomeID: "outc_1", Iteration: it(0), ProcessedAt: at("t5")},
		{Type: ma.EventSpanOutcomeEvaluationEnd, OutcomeEvaluationStartID: "sevt_s0", OutcomeID: "outc_1", Iteration: it(0), Result: "needs_revision", Explanation: at("no title"), ProcessedAt: at("t6")},
		{Type: ma.EventSpanModelRequestStart, ID: "sevt_m2", ProcessedAt: at("t7")},
		{Type: ma.EventAgentMessage, ProcessedAt: at("t8"), Content: []ma.ContentBlock{{Type: "text", Text: "final"}}},
		{Type: ma.EventSpanOutcomeEvaluationStart, ID: "sevt_s1", OutcomeID: "outc_1", Iteration: it(1), ProcessedAt: at("t8")},
		{Type: ma.EventSpanOutcomeEvaluationEnd, OutcomeEvaluationStartID: "sevt_s1", OutcomeID: "outc_1", Iteration: it(1), Result: "satisfied", Explanation: at("good"), ProcessedAt: at("t9")},
		{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopEndTurn}, ProcessedAt: at("t9")},
	}
}

// TestFoldStates follows an outcome through its states, and a fold
// resumed from each state's evaluations agrees with the whole log's.
func TestFoldStates(t *testing.T) {
	log := outcomeLog()
	want := []struct {
		result    string
		iteration int64
		active    bool
		startID   string
		answer    string
	}{
		{"pending", 0, false, "", ""},
		{"pending", 0, false, "", ""},
		{"running", 0, true, "", ""},
		{"running", 0, true, "", ""},
		{"running", 0, true, "", "draft"},
		{"evaluating", 0, true, "sevt_s0", "draft"},
		{"evaluating", 0, true, "sevt_s0", "draft"},
		{"running", 1, true, "", ""},
		{"running", 1, true, "", ""},
		{"running", 1, true, "", "final"},
		{"evaluating", 1, true, "sevt_s1", "final"},
		{"satisfied", 1, false, "", ""},
		{"satisfied", 1, false, "", ""},
	}
	f := NewFold()
	for i, ev := range log {
		resumed := Resume(f.Evaluations())
		f.Feed(ev)
		resumed.Feed(ev)
		e := f.Evaluations()
		if len(e) != 1 || e[0].Result != want[i].result || e[0].Iteration != want[i].iteration {
			t.Fatalf("after event %d (%s): %+v, want %s at iteration %d", i, ev.Type, e, want[i].result, want[i].iteration)
		}
		if r := resumed.Evaluations(); r[0].Result != e[0].Result || r[0].Iteration != e[0].Iteration {
			t.Fatalf("after event %d: resumed fold %+v, whole fold %+v", i, r, e)
		}
		a := f.Active()
		if (a != nil) != want[i].active || a != nil && (a.StartID != want[i].startID || contentOf(a.Answer) != want[i].answer) {
			t.Fatalf("after event %d (%s): active %+v, want %+v", i, ev.Type, a, want[i])
		}
	}
	e := f.Evaluations()[0]
	if e.CompletedAt == nil || *e.CompletedAt != "t9" || e.Explanation == nil || *e.Explanation != "good" {
		t.Fatalf("final evaluation %+v", e)
	}
	if _, open := Open(f.Evaluations()); open {
		t.Error("a satisfied outcome is open")
	}
}

func contentOf(c []ma.ContentBlock) string {
	var s []string
	for _, b := range c {
		s = append(s, b.Text)
	}
	return strings.Join(s, "")
}

// TestFoldTurnEnds: an outcome whose turn ends without a verdict ends
// interrupted after an interrupt, failed otherwise; a flushed one fails.
func TestFoldTurnEnds(t *testing.T) {
	log := outcomeLog()[:5] // running, the agent answered
	for _, tc := range []struct {
		name   string
		tail   []ma.Event
		result string
	}{
		{"interrupt", []ma.Event{{Type: ma.EventUserInterrupt, ProcessedAt: at("t5")}, {Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopEndTurn}, ProcessedAt: at("t5")}}, "interrupted"},
		{"exhausted", []ma.Event{{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRetriesExhausted}, ProcessedAt: at("t5")}}, "failed"},
		{"terminated", []ma.Event{{Type: ma.EventStatusTerminated, ProcessedAt: at("t5")}}, "failed"},
		{"requires_action", []ma.Event{{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRequiresAction}, ProcessedAt: at("t5")}}, "running"},
		{"budget_reached", []ma.Event{{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopBudgetReached}, ProcessedAt: at("t5")}}, "running"},
	} {
		f := NewFold()
		for _, ev := range append(append([]ma.Event{}, log...), tc.tail...) {
			f.Feed(ev)
		}
		if e := f.Evaluations()[0]; e.Result != tc.result || e.Ended() != (tc.result != "running") {
			t.Errorf("%s: %+v, want %s", tc.name, e, tc.result)
		}
	}
	f := NewFold()
	flushed := log[0]
	flushed.Flushed = true
	f.Feed(log[0])
	f.Feed(ma.Event{Type: ma.EventSessionError, ProcessedAt: at("t1")})
	f.Feed(flushed)
	if e := f.Evaluations()[0]; e.Result != "failed" || e.CompletedAt == nil || *e.CompletedAt != "t1" {
		t.Errorf("flushed: %+v, want failed at t1", e)
	}
}
