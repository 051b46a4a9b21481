package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// threadLog is a session with a child thread and the log of both, as
// seedThreadLog writes them, and the seqs each view holds.
type threadLog struct {
	sess                   ma.Session
	child                  ma.SessionThread
	session, primary, kids []int64 // the seqs of SessionView, the primary's and the child's ThreadView
}

// seedThreadLog writes, in one transaction, a child thread and events of
// both threads, of every kind the views sort differently.
func seedThreadLog(t *testing.T, s store.Store) threadLog {
	t.Helper()
	sess := newSession(t, s, "agent_a")
	primary := ma.PrimaryThreadID(sess.ID)
	child := ma.SessionThread{ID: ids.New(ma.ThreadPrefix), Status: ma.StatusRunning, ParentThreadID: &primary,
		Agent: ma.ThreadAgent{Type: ma.ThreadAgentSaved, ID: "agent_b", Name: "researcher", Version: 1}}
	ts := now()
	text := []ma.ContentBlock{{Type: "text", Text: "x"}}
	created := ma.ThreadCreated(child.ID, "researcher", nil)
	running := ma.ThreadStatus(ma.EventThreadStatusRunning, child.ID, "researcher", nil)
	evs := []*ma.Event{
		{Type: ma.EventUserMessage, Content: text, ProcessedAt: &ts}, // 1 primary
		&created, // 2 primary, names the child
		&running, // 3 child, cross-posted
		{Type: ma.EventAgentMessage, Content: text, SessionThreadID: child.ID, ProcessedAt: &ts},                         // 4 child
		{Type: ma.EventAgentToolUse, Name: "bash", EvaluatedPermission: "ask", SessionThreadID: child.ID},                // 5 child, cross-posted
		{Type: ma.EventAgentToolUse, Name: "bash", EvaluatedPermission: "allow", SessionThreadID: child.ID},              // 6 child
		{Type: ma.EventUserInterrupt, SessionThreadID: primary, ProcessedAt: &ts},                                        // 7 primary
		{Type: ma.EventThreadMessageReceived, FromSessionThreadID: child.ID, FromAgentName: "researcher", Content: text}, // 8 primary
		{Type: ma.EventUserToolConfirmation, ToolUseID: "sevt_x", Result: "allow", SessionThreadID: child.ID},            // 9 child, the client's
	}
	if _, err := s.UpdateSession(context.Background(), sess.ID, func(tx store.Tx) error {
		if err := tx.PutThread(&child); err != nil {
			return err
		}
		return tx.Append(evs...)
	}); err != nil {
		t.Fatal(err)
	}
	return threadLog{sess: sess, child: child,
		session: []int64{1, 2, 3, 5, 7, 8, 9}, primary: []int64{1, 2, 7, 8}, kids: []int64{3, 4, 5, 6, 9}}
}

func seqs(entries []store.Entry) []int64 {
	var out []int64
	for _, e := range entries {
		out = append(out, e.Seq)
	}
	return out
}

// testThreadViews: the session's stream shows the primary thread's events
// and the child's cross-posts, a thread's stream only its own, through
// every read of the log; each entry knows its thread.
func testThreadViews(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := seedThreadLog(t, s)
	views := []struct {
		name string
		v    store.View
		want []int64
	}{
		{"session", store.SessionView(), l.session},
		{"primary", store.ThreadView(l.sess.ID, ma.PrimaryThreadID(l.sess.ID)), l.primary},
		{"child", store.ThreadView(l.sess.ID, l.child.ID), l.kids},
		{"whole log", store.View{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
	}
	all, err := s.ReadLog(ctx, l.sess.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range views {
		raw, err := s.ReadViewRaw(ctx, l.sess.ID, c.v, 0, 100, 0)
		if err != nil || !slices.Equal(seqs(raw), c.want) {
			t.Errorf("ReadViewRaw(%s) = %v, %v; want %v", c.name, seqs(raw), err, c.want)
		}
		if after, _ := s.ReadViewRaw(ctx, l.sess.ID, c.v, 4, 2, 0); !slices.Equal(seqs(after), firstAfter(c.want, 4, 2)) {
			t.Errorf("ReadViewRaw(%s) after 4, 2 of them = %v", c.name, seqs(after))
		}
		list, err := s.ListEvents(ctx, l.sess.ID, store.EventQuery{View: c.v, Limit: 100})
		if err != nil || !slices.Equal(seqs(list), c.want) {
			t.Errorf("ListEvents(%s) = %v, %v; want %v", c.name, seqs(list), err, c.want)
		}
		desc, _ := s.ListEvents(ctx, l.sess.ID, store.EventQuery{View: c.v, Limit: 2, Desc: true, MaxBytes: 1 << 20, Raw: true})
		if w := slices.Clone(c.want); !slices.Equal(seqs(desc), []int64{w[len(w)-1], w[len(w)-2]}) {
			t.Errorf("ListEvents(%s) newest 2 = %v", c.name, seqs(desc))
		}
		var filtered []int64
		for _, e := range all {
			if c.v.Includes(e) {
				filtered = append(filtered, e.Seq)
			}
		}
		if !slices.Equal(filtered, c.want) {
			t.Errorf("View.Includes(%s) over ReadLog keeps %v, want %v", c.name, filtered, c.want)
		}
	}
	checkViewBudget(t, s, l)
}

// firstAfter returns the first n of seqs greater than after.
func firstAfter(seqs []int64, after int64, n int) []int64 {
	var out []int64
	for _, q := range seqs {
		if q > after && len(out) < n {
			out = append(out, q)
		}
	}
	return out
}

// checkViewBudget: a read of a view within a byte budget ends at a head of
// the view, not of another thread.
func checkViewBudget(t *testing.T, s store.Store, l threadLog) {
	t.Helper()
	ctx := context.Background()
	v := store.ThreadView(l.sess.ID, l.child.ID)
	full, _ := s.ReadViewRaw(ctx, l.sess.ID, v, 0, 100, 0)
	budget := full[0].Size + full[1].Size
	got, err := s.ReadViewRaw(ctx, l.sess.ID, v, 0, 100, budget)
	if err != nil || len(got) != 3 || got[0].Seq != 3 || got[1].Seq != 4 || !got[2].Head() || got[2].Seq != 5 || got[2].Thread != l.child.ID || !got[2].OnSession {
		t.Fatalf("ReadViewRaw(child) within %d bytes = %+v, %v; want 3, 4 and the head of 5", budget, got, err)
	}
}

// testThreads: child threads are written in the session's transaction,
// read in it and outside it (filtered, paged, in the session's workspace
// only), and go with their session.
func testThreads(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := seedThreadLog(t, s)
	adv := ma.SessionThread{ID: ids.New(ma.ThreadPrefix), Status: ma.StatusIdle, ParentThreadID: l.child.ParentThreadID,
		Agent: ma.ThreadAgent{Type: ma.ThreadAgentAdvisor, Model: ma.ModelConfig{ID: "claude-opus-4-1"}}}
	if _, err := s.UpdateSession(ctx, l.sess.ID, func(tx store.Tx) error {
		if err := tx.PutThread(&adv); err != nil {
			return err
		}
		ths, err := tx.Threads()
		if err != nil || len(ths) != 2 || ths[0].ID != l.child.ID || ths[1].ID != adv.ID {
			t.Errorf("tx.Threads() = %+v, %v", ths, err)
		}
		if _, err := tx.Thread("sthr_missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("tx.Thread(missing) = %v, want ErrNotFound", err)
		}
		th, err := tx.Thread(l.child.ID)
		if err != nil || th.Agent.Name != "researcher" || th.SessionID != l.sess.ID || th.Type != ma.ThreadType || th.CreatedAt == "" {
			t.Errorf("tx.Thread(child) = %+v, %v", th, err)
		}
		th.Status = ma.StatusIdle
		return tx.PutThread(&th)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetThread(ctx, l.sess.ID, adv.ID)
	if err != nil || got.Agent.Type != ma.ThreadAgentAdvisor || got.Agent.Model.ID != "claude-opus-4-1" || *got.ParentThreadID != ma.PrimaryThreadID(l.sess.ID) {
		t.Fatalf("GetThread(advisor) = %+v, %v", got, err)
	}
	checkThreadLists(t, s, l.sess.ID, l.child.ID, adv.ID)
	other := store.WithWorkspace(ctx, "wrkspc_other")
	if _, err := s.GetThread(other, l.sess.ID, adv.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetThread from another workspace = %v, want ErrNotFound", err)
	}
	if _, err := s.ListThreads(other, l.sess.ID, store.ThreadQuery{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListThreads from another workspace = %v, want ErrNotFound", err)
	}
	if _, err := s.GetThread(store.WithWorkspace(ctx, store.DefaultWorkspace), l.sess.ID, adv.ID); err != nil {
		t.Errorf("GetThread in the session's workspace: %v", err)
	}
	if err := s.DeleteSession(ctx, l.sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetThread(ctx, l.sess.ID, adv.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetThread after the session's delete = %v, want ErrNotFound", err)
	}
}

// checkThreadLists: ListThreads filters by status and pages forward.
func checkThreadLists(t *testing.T, s store.Store, sessionID, first, second string) {
	t.Helper()
	ctx := context.Background()
	ids := func(items []store.Item[ma.SessionThread]) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Value.ID)
		}
		return out
	}
	all, err := s.ListThreads(ctx, sessionID, store.ThreadQuery{ListQuery: store.ListQuery{Limit: 100}})
	if err != nil || !slices.Equal(ids(all), []string{first, second}) {
		t.Fatalf("ListThreads = %v, %v", ids(all), err)
	}
	page, _ := s.ListThreads(ctx, sessionID, store.ThreadQuery{ListQuery: store.ListQuery{Limit: 1}})
	rest, _ := s.ListThreads(ctx, sessionID, store.ThreadQuery{ListQuery: store.ListQuery{Limit: 1, After: page[0].Pos}})
	if !slices.Equal(ids(page), []string{first}) || !slices.Equal(ids(rest), []string{second}) {
		t.Errorf("ListThreads pages = %v then %v", ids(page), ids(rest))
	}
	if running, _ := s.ListThreads(ctx, sessionID, store.ThreadQuery{Statuses: []string{ma.StatusRunning}}); len(running) != 0 {
		t.Errorf("ListThreads(running) = %v, want none", ids(running))
	}
	if idle, _ := s.ListThreads(ctx, sessionID, store.ThreadQuery{Statuses: []string{ma.StatusIdle, ma.StatusTerminated}}); len(idle) != 2 {
		t.Errorf("ListThreads(idle, terminated) = %v, want both", ids(idle))
	}
}

// testThreadsLeft: the primary and every child not archived count against
// ma.MaxThreads.
func testThreadsLeft(t *testing.T, _ store.Store) {
	ts := now()
	children := make([]ma.SessionThread, ma.MaxThreads)
	if n := store.ThreadsLeft(nil); n != ma.MaxThreads-1 {
		t.Errorf("ThreadsLeft(no children) = %d, want %d", n, ma.MaxThreads-1)
	}
	if n := store.ThreadsLeft(children[:ma.MaxThreads-1]); n != 0 {
		t.Errorf("ThreadsLeft(%d children) = %d, want 0", ma.MaxThreads-1, n)
	}
	if n := store.ThreadsLeft(children); n != 0 {
		t.Errorf("ThreadsLeft(%d children) = %d, want 0", ma.MaxThreads, n)
	}
	children[0].ArchivedAt, children[1].ArchivedAt = &ts, &ts
	if n := store.ThreadsLeft(children[:ma.MaxThreads-1]); n != 2 {
		t.Errorf("ThreadsLeft with two archived = %d, want 2", n)
	}
}
