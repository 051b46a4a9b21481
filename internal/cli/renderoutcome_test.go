package cli

import "testing"

func TestRenderOutcome(t *testing.T) {
	got := renderAll(t, newRenderer(false, false), running,
		`{"type":"user.define_outcome","id":"sevt_o","processed_at":"t","outcome_id":"outc_1","description":"Write the report","max_iterations":3}`,
		`{"type":"span.outcome_evaluation_start","id":"sevt_s","processed_at":"t","outcome_id":"outc_1","iteration":0}`,
		`{"type":"span.outcome_evaluation_ongoing","id":"sevt_g","processed_at":"t","outcome_id":"outc_1","iteration":0}`,
		`{"type":"span.outcome_evaluation_end","id":"sevt_e","processed_at":"t","outcome_id":"outc_1","iteration":0,"result":"needs_revision","explanation":"No title."}`,
		`{"type":"span.outcome_evaluation_end","id":"sevt_f","processed_at":"t","outcome_id":"outc_1","iteration":1,"result":"satisfied","explanation":"Good."}`,
		endTurn)
	want := "◎ outcome outc_1: Write the report\n" +
		"… grading the work (iteration 0)\n" +
		"↻ outcome needs_revision (iteration 0): No title.\n" +
		"✓ outcome satisfied (iteration 1): Good.\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
