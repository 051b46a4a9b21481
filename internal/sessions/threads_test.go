package sessions

import (
	"context"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// childTurn gives the session a child thread in status, waiting for the
// client: a confirmation of its tool use ta1 and a result of its custom
// tool use tc1, cross-posted; the session idles on requires_action.
func childTurn(f *fixture, id, status string) ma.SessionThread {
	f.t.Helper()
	now := ma.Time(time.Now())
	primary := ma.PrimaryThreadID(id)
	child := ma.SessionThread{ID: ids.New(ma.ThreadPrefix), Status: status, ParentThreadID: &primary,
		Agent: ma.ThreadAgent{Type: ma.ThreadAgentInline, Name: "helper"}}
	created := ma.ThreadCreated(child.ID, "helper", nil)
	if _, err := f.svc.Writer().Update(context.Background(), id, func(tx store.Tx) error {
		if err := tx.PutThread(&child); err != nil {
			return err
		}
		return tx.Append(
			&ma.Event{Type: ma.EventStatusRunning, ProcessedAt: &now}, &created,
			&ma.Event{ID: "ta1", Type: ma.EventAgentToolUse, Name: "bash", EvaluatedPermission: "ask", SessionThreadID: child.ID, ProcessedAt: &now},
			&ma.Event{ID: "tc1", Type: ma.EventAgentCustomToolUse, Name: "lookup", SessionThreadID: child.ID, ProcessedAt: &now},
			&ma.Event{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopRequiresAction, EventIDs: []string{"ta1", "tc1"}}, ProcessedAt: &now})
	}); err != nil {
		f.t.Fatal(err)
	}
	f.set(id, func(s *ma.Session) { s.Status = ma.StatusIdle })
	return child
}

// TestSendRoutesToThreads: answers to a child thread's tool uses are
// stored with the child's id, which the client never sends; an interrupt
// names a thread of the session that is not archived, or none.
func TestSendRoutesToThreads(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		sess := f.session()
		child := childTurn(f, sess.ID, ma.StatusIdle)
		evs, err := f.svc.Send(ctx, sess.ID, []ma.Event{
			{Type: ma.EventUserToolConfirmation, ToolUseID: "ta1", Result: "allow"},
			{Type: ma.EventUserCustomToolResult, CustomToolUseID: "tc1"},
		}, nil)
		if err != nil || evs[0].SessionThreadID != child.ID || evs[1].SessionThreadID != child.ID {
			t.Fatalf("sent %+v, %v; want both routed to %s", evs, err, child.ID)
		}
		for _, e := range f.log(sess.ID)[len(f.log(sess.ID))-2:] {
			if e.SessionThreadID != child.ID {
				t.Errorf("logged %s with thread %q, want %s", e.Type, e.SessionThreadID, child.ID)
			}
		}
		_, err = f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserInterrupt, SessionThreadID: "sthr_nope"}}, nil)
		wantRejected(t, err, "bad", "events[0].session_thread_id: session "+sess.ID+" has no thread sthr_nope")
		for _, named := range []string{child.ID, ma.PrimaryThreadID(sess.ID)} {
			evs, err := f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserInterrupt, SessionThreadID: named}}, nil)
			if err != nil || evs[0].SessionThreadID != named {
				t.Fatalf("interrupt of %s: %+v, %v", named, evs, err)
			}
		}
		if _, err := f.svc.ArchiveThread(ctx, sess.ID, child.ID); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.Send(ctx, sess.ID, []ma.Event{{Type: ma.EventUserInterrupt, SessionThreadID: child.ID}}, nil)
		wantRejected(t, err, "bad", "is archived")
	})
}

// TestArchiveThread: only an idle child thread is archived; archiving it
// again changes nothing; the primary thread and unknown threads are
// refused.
func TestArchiveThread(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		ctx := context.Background()
		sess := f.session()
		child := childTurn(f, sess.ID, ma.StatusRunning)
		_, err := f.svc.ArchiveThread(ctx, sess.ID, child.ID)
		wantRejected(t, err, "conflict", "while it is running; only an idle thread can be archived")
		_, err = f.svc.ArchiveThread(ctx, sess.ID, ma.PrimaryThreadID(sess.ID))
		wantRejected(t, err, "conflict", "is the primary thread")
		_, err = f.svc.ArchiveThread(ctx, sess.ID, "sthr_nope")
		wantRejected(t, err, "not found", "has no thread sthr_nope")
		if _, err := f.svc.Writer().Update(ctx, sess.ID, func(tx store.Tx) error {
			th, err := tx.Thread(child.ID)
			if err != nil {
				return err
			}
			th.Status = ma.StatusIdle
			return tx.PutThread(&th)
		}); err != nil {
			t.Fatal(err)
		}
		th, err := f.svc.ArchiveThread(ctx, sess.ID, child.ID)
		if err != nil || th.ArchivedAt == nil || th.UpdatedAt != *th.ArchivedAt {
			t.Fatalf("ArchiveThread = %+v, %v", th, err)
		}
		again, err := f.svc.ArchiveThread(ctx, sess.ID, child.ID)
		if err != nil || *again.ArchivedAt != *th.ArchivedAt {
			t.Fatalf("archived again: %+v, %v", again, err)
		}
		if got, _ := st.GetThread(ctx, sess.ID, child.ID); got.ArchivedAt == nil {
			t.Fatal("the archive was not stored")
		}
	})
}

// TestPrimaryThread: the primary thread is the session's, less its
// children's usage.
func TestPrimaryThread(t *testing.T) {
	sess := ma.Session{ID: "sesn_abc", Status: ma.StatusRunning, Agent: ma.SessionAgent{ID: "agent_a", Name: "coordinator", Version: 3},
		Usage: ma.SessionUsage{InputTokens: 100, OutputTokens: 50}, CreatedAt: "t0", UpdatedAt: "t1"}
	children := []ma.SessionThread{{Usage: &ma.ThreadUsage{InputTokens: 30, OutputTokens: 20}}, {Usage: nil}, {Usage: &ma.ThreadUsage{InputTokens: 10}}}
	th := PrimaryThread(sess, children)
	if th.ID != "sthr_abc" || th.ParentThreadID != nil || th.Status != ma.StatusRunning || th.Agent.Type != ma.ThreadAgentSaved ||
		th.Agent.Name != "coordinator" || th.Agent.Version != 3 || th.Usage.InputTokens != 60 || th.Usage.OutputTokens != 30 {
		t.Fatalf("PrimaryThread = %+v (usage %+v)", th, th.Usage)
	}
}
