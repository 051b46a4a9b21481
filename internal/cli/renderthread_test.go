package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestRenderThreads: a multi-agent session's stream as the CLI shows it:
// a child thread started, the coordinator's message to it, its status
// changes and its reply, labelled by thread; a child's tool call waiting
// for approval and its confirmation carry the child's label (the wait
// names the thread), the primary thread's own events none.
func TestRenderThreads(t *testing.T) {
	got := renderAll(t, newRenderer(false, true), running,
		`{"type":"session.thread_created","id":"sevt_c","processed_at":"t","session_thread_id":"sthr_r","agent_name":"researcher","workflow_run_id":null}`,
		`{"type":"agent.thread_message_sent","id":"sevt_s","processed_at":"t","to_session_thread_id":"sthr_r","to_agent_name":"researcher","content":[{"type":"text","text":"Find the\nfigures."}]}`,
		`{"type":"session.thread_status_running","id":"sevt_r","processed_at":"t","session_thread_id":"sthr_r","agent_name":"researcher"}`,
		`{"type":"agent.tool_use","id":"sevt_t","processed_at":"t","session_thread_id":"sthr_r","name":"bash","input":{"command":"ls"},"evaluated_permission":"ask"}`,
		`{"type":"session.status_idle","id":"sevt_w","processed_at":"t","stop_reason":{"type":"requires_action","event_ids":["sevt_t"]}}`,
		running,
		`{"type":"user.tool_confirmation","id":"sevt_a","processed_at":"t","session_thread_id":"sthr_r","tool_use_id":"sevt_t","result":"allow"}`,
		`{"type":"session.thread_status_idle","id":"sevt_i","processed_at":"t","session_thread_id":"sthr_r","agent_name":"researcher","stop_reason":{"type":"end_turn"},"stop_details":null}`,
		`{"type":"agent.thread_message_received","id":"sevt_m","processed_at":"t","from_session_thread_id":"sthr_r","from_agent_name":"researcher","content":[{"type":"text","text":"42."}]}`,
		`{"type":"agent.tool_use","id":"sevt_p","processed_at":"t","name":"bash","input":{"command":"pwd"},"evaluated_permission":"allow"}`,
		`{"type":"session.thread_status_terminated","id":"sevt_x","processed_at":"t","session_thread_id":"sthr_q","agent_name":"critic"}`,
		`{"type":"user.interrupt","id":"sevt_u","processed_at":"t","session_thread_id":"sthr_r"}`,
		endTurn)
	want := "⑂ thread researcher started (sthr_r)\n" +
		"⇢ to researcher: Find the figures.\n" +
		"[researcher] running\n" +
		"[researcher] → bash {\"command\":\"ls\"}  (needs approval)\n" +
		"waiting for approval of bash in thread researcher\n" +
		"[researcher] ✓ approved bash\n" +
		"[researcher] idle (end turn)\n" +
		"⇠ from researcher: 42.\n" +
		"→ bash {\"command\":\"pwd\"}\n" +
		"[critic] terminated\n" +
		"[researcher] interrupted\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestTailThreads: `sessions tail --history` of a real server's session
// with a child thread, written as a runner would: the thread's creation,
// status changes and the messages between the threads are shown, the
// child's own work (on its thread stream) is not.
func TestTailThreads(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "run", "--agent", s.agentID, "@text delegating").must(t)
	sess := regexp.MustCompile(`sesn_\w+`).FindString(r.stderr)
	primary := ma.PrimaryThreadID(sess)
	child := ma.SessionThread{ID: ids.New(ma.ThreadPrefix), Status: ma.StatusIdle, ParentThreadID: &primary,
		Agent: ma.ThreadAgent{Type: ma.ThreadAgentInline, Name: "researcher", Model: ma.ModelConfig{ID: "scripted"}}}
	now := ma.Time(time.Now())
	text := func(s string) []ma.ContentBlock { return []ma.ContentBlock{{Type: "text", Text: s}} }
	created := ma.ThreadCreated(child.ID, "researcher", nil)
	running := ma.ThreadStatus(ma.EventThreadStatusRunning, child.ID, "researcher", nil)
	idle := ma.ThreadStatus(ma.EventThreadStatusIdle, child.ID, "researcher", &ma.StopReason{Type: ma.StopEndTurn})
	evs := []*ma.Event{&created,
		{Type: ma.EventThreadMessageSent, ToSessionThreadID: child.ID, ToAgentName: "researcher", Content: text("Find the figures."), ProcessedAt: &now},
		&running,
		{Type: ma.EventAgentMessage, Content: text("the child's own answer"), SessionThreadID: child.ID, ProcessedAt: &now},
		&idle,
		{Type: ma.EventThreadMessageReceived, FromSessionThreadID: child.ID, FromAgentName: "researcher", Content: text("It is 42."), ProcessedAt: &now}}
	if _, err := s.store.UpdateSession(context.Background(), sess, func(tx store.Tx) error {
		if err := tx.PutThread(&child); err != nil {
			return err
		}
		return tx.Append(evs...)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := s.runCtx(t, ctx, "sessions", "tail", sess, "--history", "--until-idle").must(t)
	assertContains(t, tr.stdout, "delegating\n⑂ thread researcher started ("+child.ID+")\n⇢ to researcher: Find the figures.\n"+
		"[researcher] running\n[researcher] idle (end turn)\n⇠ from researcher: It is 42.\n")
	if strings.Contains(tr.stdout, "the child's own answer") {
		t.Errorf("tail shows the child's own message:\n%s", tr.stdout)
	}
}
