package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// ArchiveThread archives an idle child thread of the session (an idle
// thread parked on requires_action counts): it stops counting against
// ma.MaxThreads. Archiving an archived thread changes nothing. The
// primary thread cannot be archived (the session can), nor a thread that
// is not idle (interrupt it first): both are a conflict.
func (s *Service) ArchiveThread(ctx context.Context, sessionID, threadID string) (ma.SessionThread, error) {
	var th ma.SessionThread
	_, err := s.update(ctx, sessionID, func(tx store.Tx) error {
		if threadID == ma.PrimaryThreadID(sessionID) {
			return conflict("thread %s is the primary thread of session %s; archive the session instead", threadID, sessionID)
		}
		var err error
		if th, err = tx.Thread(threadID); errors.Is(err, store.ErrNotFound) {
			return notFound("session %s has no thread %s", sessionID, threadID)
		} else if err != nil {
			return err
		}
		if th.ArchivedAt != nil {
			return nil
		}
		if th.Status != ma.StatusIdle {
			return conflict("cannot archive thread %s while it is %s; only an idle thread can be archived (interrupt it first)", threadID, th.Status)
		}
		now := ma.Time(time.Now())
		th.ArchivedAt, th.UpdatedAt = &now, now
		return tx.PutThread(&th)
	})
	return th, err
}

// PrimaryThread is the primary thread of sess, derived from the session
// (it is not stored): its agent is the session's, its status the
// session's (which aggregates its threads'), its figures the session's,
// and its usage the session's less what its child threads (children, all
// of them) used.
func PrimaryThread(sess ma.Session, children []ma.SessionThread) ma.SessionThread {
	a := sess.Agent
	th := ma.SessionThread{
		ID: ma.PrimaryThreadID(sess.ID), Type: ma.ThreadType, SessionID: sess.ID, Status: sess.Status,
		Agent: ma.ThreadAgent{Type: ma.ThreadAgentSaved, ID: a.ID, Name: a.Name, Description: a.Description, System: a.System,
			Model: a.Model, Tools: a.Tools, MCPServers: a.MCPServers, Skills: a.Skills, Version: a.Version},
		Stats:     &ma.ThreadStats{ActiveSeconds: sess.Stats.ActiveSeconds, DurationSeconds: sess.Stats.DurationSeconds},
		CreatedAt: sess.CreatedAt, UpdatedAt: sess.UpdatedAt, ArchivedAt: sess.ArchivedAt,
	}
	u := sess.Usage
	for _, c := range children {
		if c.Usage == nil {
			continue
		}
		u.InputTokens -= c.Usage.InputTokens
		u.OutputTokens -= c.Usage.OutputTokens
		u.CacheReadInputTokens -= c.Usage.CacheReadInputTokens
		u.CacheCreation.Ephemeral5mInputTokens -= c.Usage.CacheCreation.Ephemeral5mInputTokens
		u.CacheCreation.Ephemeral1hInputTokens -= c.Usage.CacheCreation.Ephemeral1hInputTokens
	}
	th.Usage = &ma.ThreadUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CacheReadInputTokens,
		CacheCreation: u.CacheCreation, ActiveSeconds: sess.Stats.ActiveSeconds, ServerToolUse: u.ServerToolUse}
	return th
}

// route gives a client event the thread it belongs to, in tx: a tool
// confirmation or result is stored with the session_thread_id of the tool
// use it answers (clients never send one); an interrupt must name a
// thread of the session that is not archived, or none. f names the event
// in errors.
func route(tx store.Tx, f string, ev *ma.Event) error {
	switch ev.Type {
	case ma.EventUserToolConfirmation, ma.EventUserToolResult, ma.EventUserCustomToolResult:
		id := ev.ToolUseID
		if ev.Type == ma.EventUserCustomToolResult {
			id = ev.CustomToolUseID
		}
		use, err := tx.Event(id)
		if err != nil {
			return err // checked awaited already: it is in the log
		}
		ev.SessionThreadID = use.SessionThreadID
	case ma.EventUserInterrupt:
		id := ev.SessionThreadID
		if id == "" || id == ma.PrimaryThreadID(tx.Session().ID) {
			return nil
		}
		th, err := tx.Thread(id)
		if errors.Is(err, store.ErrNotFound) {
			return rejected("%s.session_thread_id: session %s has no thread %s", f, tx.Session().ID, id)
		}
		if err != nil {
			return err
		}
		if th.ArchivedAt != nil {
			return rejected("%s.session_thread_id: thread %s is archived; there is nothing to interrupt", f, id)
		}
	}
	return nil
}
