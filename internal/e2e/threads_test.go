package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// openThreadStream opens a thread's SSE stream with the SDK.
func (s *server) openThreadStream(t *testing.T, sessionID, threadID string, deltas ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	params := anthropic.BetaSessionThreadEventStreamParams{SessionID: sessionID}
	for _, d := range deltas {
		params.EventDeltas = append(params.EventDeltas, anthropic.BetaManagedAgentsDeltaType(d))
	}
	st := s.client.Beta.Sessions.Threads.Events.StreamEvents(ctx, threadID, params)
	return follow(t, cancel, st, func(ev anthropic.BetaManagedAgentsStreamSessionThreadEventsUnion) string { return ev.Type })
}

// threadEvents lists a thread's events through the SDK's auto-pager.
func (s *server) threadEvents(t *testing.T, sessionID, threadID string) []ma.Event {
	t.Helper()
	iter := s.client.Beta.Sessions.Threads.Events.ListAutoPaging(context.Background(), threadID,
		anthropic.BetaSessionThreadEventListParams{SessionID: sessionID, Limit: anthropic.Int(2)})
	var out []ma.Event
	for iter.Next() {
		var ev ma.Event
		if err := json.Unmarshal([]byte(iter.Current().RawJSON()), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// listThreads lists a session's threads through the SDK's auto-pager.
func (s *server) listThreads(t *testing.T, sessionID string, p anthropic.BetaSessionThreadListParams) []anthropic.BetaManagedAgentsSessionThread {
	t.Helper()
	iter := s.client.Beta.Sessions.Threads.ListAutoPaging(context.Background(), sessionID, p)
	var out []anthropic.BetaManagedAgentsSessionThread
	for iter.Next() {
		out = append(out, iter.Current())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func eventIDs(evs []ma.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func frameIDs(fs []frame) []string {
	var out []string
	for _, f := range fs {
		if f.ID != "" {
			out = append(out, f.ID)
		}
	}
	return out
}

// wantStatus fails unless err is an API error with that status whose
// message holds msg.
func wantStatus(t *testing.T, err error, status int, msg string) {
	t.Helper()
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != status || !strings.Contains(ae.RawJSON(), msg) {
		t.Fatalf("got %v, want a %d saying %q", err, status, msg)
	}
}

// TestThreadsOfOrdinarySession: a single-agent session has its primary
// thread, listed, read and streamed through the SDK's thread service; its
// events and stream are the session's, previews included, and it cannot
// be archived.
func TestThreadsOfOrdinarySession(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	primaryID := "sthr_" + strings.TrimPrefix(sess.ID, "sesn_")

	threads := s.listThreads(t, sess.ID, anthropic.BetaSessionThreadListParams{})
	if len(threads) != 1 {
		t.Fatalf("threads = %d, want the primary alone", len(threads))
	}
	p := threads[0]
	if p.ID != primaryID || p.SessionID != sess.ID || p.Status != "idle" || p.Agent.Type != "agent" || p.Agent.ID != a.ID ||
		p.Agent.Name != "test agent" || p.Agent.Version != 1 || !strings.Contains(p.RawJSON(), `"parent_thread_id":null`) ||
		!strings.Contains(p.RawJSON(), `"workflow_run_id":null`) || string(p.Type) != "session_thread" {
		t.Fatalf("primary thread %s", p.RawJSON())
	}

	onSession := s.openStream(t, sess.ID, "agent.message")
	onThread := s.openThreadStream(t, sess.ID, primaryID, "agent.message")
	s.send(t, sess.ID, userMessage("@pace 20ms\n@text the quick brown fox"))
	want, got := onSession.until(isIdle), onThread.until(isIdle)
	if !slices.Equal(types(got), types(want)) || !slices.Equal(frameIDs(got), frameIDs(want)) || !slices.Contains(types(got), "event_delta") {
		t.Fatalf("thread stream %v, session stream %v", types(got), types(want))
	}
	if ids, all := eventIDs(s.threadEvents(t, sess.ID, primaryID)), eventIDs(s.listAll(t, sess.ID)); !slices.Equal(ids, all) {
		t.Fatalf("thread events %v, session events %v", ids, all)
	}

	got1, err := s.client.Beta.Sessions.Threads.Get(ctx, primaryID, anthropic.BetaSessionThreadGetParams{SessionID: sess.ID})
	if err != nil || got1.ID != primaryID || got1.Usage.OutputTokens == 0 {
		t.Fatalf("Get(primary) = %v, %v", got1, err)
	}
	if running := s.listThreads(t, sess.ID, anthropic.BetaSessionThreadListParams{Statuses: []anthropic.BetaManagedAgentsSessionThreadStatus{"running"}}); len(running) != 0 {
		t.Fatalf("running threads = %d, want 0", len(running))
	}
	_, err = s.client.Beta.Sessions.Threads.Archive(ctx, primaryID, anthropic.BetaSessionThreadArchiveParams{SessionID: sess.ID})
	wantStatus(t, err, http.StatusConflict, "is the primary thread")
	_, err = s.client.Beta.Sessions.Threads.Get(ctx, "sthr_nope", anthropic.BetaSessionThreadGetParams{SessionID: sess.ID})
	wantStatus(t, err, http.StatusNotFound, "sthr_nope")
	_, err = s.client.Beta.Sessions.Threads.Events.List(ctx, "sthr_nope", anthropic.BetaSessionThreadEventListParams{SessionID: sess.ID})
	wantStatus(t, err, http.StatusNotFound, "sthr_nope")
	_, err = s.client.Beta.Sessions.Threads.List(ctx, sess.ID, anthropic.BetaSessionThreadListParams{Statuses: []anthropic.BetaManagedAgentsSessionThreadStatus{"asleep"}})
	wantStatus(t, err, http.StatusBadRequest, "statuses[]: unknown status")
}

// childThread writes, as a runner would, a child thread of the session
// and its session.thread_created.
func (s *server) childThread(t *testing.T, sessionID string) ma.SessionThread {
	t.Helper()
	primary := ma.PrimaryThreadID(sessionID)
	child := ma.SessionThread{ID: ids.New(ma.ThreadPrefix), Status: ma.StatusRunning, ParentThreadID: &primary,
		Agent: ma.ThreadAgent{Type: ma.ThreadAgentInline, Name: "researcher", System: "You research.", Model: ma.ModelConfig{ID: "scripted"}}}
	created := ma.ThreadCreated(child.ID, "researcher", nil)
	s.runnerWrites(t, sessionID, func(tx store.Tx) error {
		if err := tx.PutThread(&child); err != nil {
			return err
		}
		return tx.Append(&created)
	})
	return child
}

// runnerWrites runs fn in a transaction of the session, as its runner
// would (the streams see it at their next poll).
func (s *server) runnerWrites(t *testing.T, sessionID string, fn func(tx store.Tx) error) {
	t.Helper()
	if _, err := s.app.Store.UpdateSession(context.Background(), sessionID, fn); err != nil {
		t.Fatal(err)
	}
}

// TestChildThreadStreams: a child thread's events reach its own stream and
// events list; the session's stream and list show only its cross-posts;
// the list pages over both threads; a running child cannot be archived,
// an idle one can; an interrupt names a thread the session has.
func TestChildThreadStreams(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	child := s.childThread(t, sess.ID)
	onSession, onChild := s.openStream(t, sess.ID), s.openThreadStream(t, sess.ID, child.ID)
	now := ma.Time(time.Now())
	text := []ma.ContentBlock{{Type: "text", Text: "found it"}}
	running := ma.ThreadStatus(ma.EventThreadStatusRunning, child.ID, "researcher", nil)
	idle := ma.ThreadStatus(ma.EventThreadStatusIdle, child.ID, "researcher", &ma.StopReason{Type: ma.StopEndTurn})
	childEvents := []*ma.Event{&running,
		{Type: ma.EventAgentMessage, Content: text, SessionThreadID: child.ID, ProcessedAt: &now},
		{Type: ma.EventAgentToolUse, Name: "bash", Input: ma.Raw(`{}`), EvaluatedPermission: "ask", SessionThreadID: child.ID, ProcessedAt: &now},
		{Type: ma.EventAgentToolUse, Name: "bash", Input: ma.Raw(`{}`), EvaluatedPermission: "allow", SessionThreadID: child.ID, ProcessedAt: &now},
		&idle}
	s.runnerWrites(t, sess.ID, func(tx store.Tx) error { return tx.Append(childEvents...) })
	isThreadIdle := func(f frame) bool { return f.Type == ma.EventThreadStatusIdle }
	gotChild, gotSession := onChild.until(isThreadIdle), onSession.until(isThreadIdle)
	wantChild := []string{"session.thread_status_running", "agent.message", "agent.tool_use", "agent.tool_use", "session.thread_status_idle"}
	if !slices.Equal(types(gotChild), wantChild) {
		t.Fatalf("child stream %v, want %v", types(gotChild), wantChild)
	}
	wantSession := []string{"session.thread_status_running", "agent.tool_use", "session.thread_status_idle"}
	if !slices.Equal(types(gotSession), wantSession) || gotSession[1].ID != childEvents[2].ID || gotSession[1].SessionThreadID != child.ID {
		t.Fatalf("session stream %v, want %v", types(gotSession), wantSession)
	}
	if got := s.threadEvents(t, sess.ID, child.ID); !slices.Equal(eventIDs(got), eventIDs(deref(childEvents))) {
		t.Fatalf("child events %v", eventIDs(got))
	}
	all := s.listAll(t, sess.ID)
	if all[0].Type != ma.EventThreadCreated || all[0].SessionThreadID != child.ID || string(all[0].WorkflowRunID) != "null" ||
		slices.ContainsFunc(all, func(e ma.Event) bool { return e.ID == childEvents[1].ID || e.ID == childEvents[3].ID }) || len(all) != 4 {
		t.Fatalf("session events %+v", all)
	}
	if primary := s.threadEvents(t, sess.ID, ma.PrimaryThreadID(sess.ID)); len(primary) != 1 || primary[0].Type != ma.EventThreadCreated {
		t.Fatalf("primary thread's events %+v", primary)
	}
	checkChildThreadAPI(t, s, sess.ID, child)
}

// checkChildThreadAPI: list, get, archive and interrupts of a session
// with a running child thread.
func checkChildThreadAPI(t *testing.T, s *server, sessionID string, child ma.SessionThread) {
	t.Helper()
	ctx := context.Background()
	paged := s.listThreads(t, sessionID, anthropic.BetaSessionThreadListParams{Limit: anthropic.Int(1)})
	if len(paged) != 2 || paged[0].ID != ma.PrimaryThreadID(sessionID) || paged[1].ID != child.ID || paged[1].ParentThreadID != paged[0].ID ||
		paged[1].Agent.Type != "inline" || paged[1].Agent.Name != "researcher" {
		t.Fatalf("threads paged by one: %v", paged)
	}
	if running := s.listThreads(t, sessionID, anthropic.BetaSessionThreadListParams{Statuses: []anthropic.BetaManagedAgentsSessionThreadStatus{"running"}}); len(running) != 1 || running[0].ID != child.ID {
		t.Fatalf("running threads %v", running)
	}
	arch := anthropic.BetaSessionThreadArchiveParams{SessionID: sessionID}
	_, err := s.client.Beta.Sessions.Threads.Archive(ctx, child.ID, arch)
	wantStatus(t, err, http.StatusConflict, "while it is running")
	interrupt := func(id string) error {
		_, err := s.client.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
			{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{SessionThreadID: anthropic.String(id)}}}})
		return err
	}
	wantStatus(t, interrupt("sthr_nope"), http.StatusBadRequest, "has no thread sthr_nope")
	s.runnerWrites(t, sessionID, func(tx store.Tx) error {
		th, err := tx.Thread(child.ID)
		if err != nil {
			return err
		}
		th.Status = ma.StatusIdle
		return tx.PutThread(&th)
	})
	th, err := s.client.Beta.Sessions.Threads.Archive(ctx, child.ID, arch)
	if err != nil || th.ArchivedAt.IsZero() || th.Status != "idle" {
		t.Fatalf("Archive(child) = %v, %v", th, err)
	}
	got, err := s.client.Beta.Sessions.Threads.Get(ctx, child.ID, anthropic.BetaSessionThreadGetParams{SessionID: sessionID})
	if err != nil || !got.ArchivedAt.Equal(th.ArchivedAt) {
		t.Fatalf("Get(child) = %v, %v", got, err)
	}
	wantStatus(t, interrupt(child.ID), http.StatusBadRequest, "is archived")
}

func deref(evs []*ma.Event) []ma.Event {
	out := make([]ma.Event, len(evs))
	for i, e := range evs {
		out[i] = *e
	}
	return out
}
