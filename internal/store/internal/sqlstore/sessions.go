package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// CreateSession implements store.Sessions.
func (s *Store) CreateSession(ctx context.Context, sess ma.Session, fn func(store.Tx) error) (ma.Session, error) {
	err := s.d.WithTx(ctx, func(tx Querier) error {
		body, err := json.Marshal(sess)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (id, status, agent_id, agent_version, environment_id, created_at, archived, body, workspace_id, deployment_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.ID, sess.Status, sess.Agent.ID, sess.Agent.Version, sess.EnvironmentID, unixOf(sess.CreatedAt), sess.ArchivedAt != nil, body, workspaceOf(ctx), deref(sess.DeploymentID)); err != nil {
			return s.conflict(err, "session "+sess.ID)
		}
		if err := recordMemoryStores(ctx, tx, sess); err != nil {
			return err
		}
		t := &sessionTx{s: s, ctx: ctx, tx: tx, sess: sess, workspace: workspaceOf(ctx)}
		if err := t.emit("session.created"); err != nil {
			return err
		}
		if fn == nil {
			return nil
		}
		if err := fn(t); err != nil {
			return err
		}
		sess = t.sess
		return t.write()
	})
	return sess, err
}

// getSession reads a session of ctx's workspace and its last seq; lock
// ends the query.
func getSession(ctx context.Context, db Querier, id, lock string) (ma.Session, int64, error) {
	var body []byte
	var last int64
	cond, args := inWorkspace(ctx, "workspace_id")
	if err := db.QueryRow(ctx, `SELECT body, last_seq FROM sessions WHERE id = ?`+cond+lock, append([]any{id}, args...)...).Scan(&body, &last); err != nil {
		return ma.Session{}, 0, notFound(err, "session", id)
	}
	var sess ma.Session
	err := json.Unmarshal(body, &sess)
	return sess, last, err
}

// GetSession implements store.Sessions.
func (s *Store) GetSession(ctx context.Context, id string) (ma.Session, error) {
	sess, _, err := getSession(ctx, s.r, id, "")
	return sess, err
}

// ListSessions implements store.Sessions.
func (s *Store) ListSessions(ctx context.Context, sq store.SessionQuery) ([]store.Item[ma.Session], error) {
	var q query
	q.scope(ctx, "workspace_id")
	if !sq.IncludeArchived {
		q.and("NOT archived")
	}
	if sq.AgentID != "" {
		q.and("agent_id = ?", sq.AgentID)
	}
	if sq.AgentVersion != 0 {
		q.and("agent_version = ?", sq.AgentVersion)
	}
	if sq.EnvironmentID != "" {
		q.and("environment_id = ?", sq.EnvironmentID)
	}
	if sq.DeploymentID != "" {
		q.and("deployment_id = ?", sq.DeploymentID)
	}
	if sq.MemoryStoreID != "" {
		q.and("id IN (SELECT session_id FROM session_memory_stores WHERE store_id = ?)", sq.MemoryStoreID)
	}
	if len(sq.Statuses) > 0 {
		q.in("status", sq.Statuses)
	}
	if len(sq.StopReasons) > 0 {
		q.in("stop_reason", sq.StopReasons)
	}
	q.since("created_at", sq.CreatedGT, sq.CreatedGTE, sq.CreatedLT, sq.CreatedLTE)
	return list(ctx, s.r, scanItem[ma.Session], `SELECT pos, body FROM sessions`, "pos", &q, sq.ListQuery)
}

// UpdateSession implements store.Sessions. The session row is locked until
// the transaction ends (or the driver runs one write transaction at a
// time), so concurrent updates take turns and never assign the same seq.
// A write with a fence for the session (store.WithFence) is refused with
// store.ErrFenced unless the fence is the session's current lease.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	var out ma.Session
	f, fence := store.FenceFrom(ctx, id)
	err := s.d.WithTx(ctx, func(tx Querier) error {
		sess, last, err := getSession(ctx, tx, id, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		if fence {
			if err := s.checkFence(ctx, tx, f); err != nil {
				return err
			}
		}
		t := &sessionTx{s: s, ctx: ctx, tx: tx, sess: sess, lastSeq: last}
		before, archived := sessionUpdatable(&sess), sess.ArchivedAt != nil
		if err := fn(t); err != nil {
			return err
		}
		out = t.sess
		if err := t.emit(sessionChangeWebhooks(before, archived, &t.sess)...); err != nil {
			return err
		}
		return t.write()
	})
	return out, err
}

// DeleteSession implements store.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.d.WithTx(ctx, func(tx Querier) error {
		cond, args := inWorkspace(ctx, "workspace_id")
		var ws string
		err := tx.QueryRow(ctx, `SELECT workspace_id FROM sessions WHERE id = ?`+cond+s.lock(LockUpdate), append([]any{id}, args...)...).Scan(&ws)
		if err != nil {
			return notFound(err, "session", id)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
			return err
		}
		if err := s.emitWebhooks(ctx, tx, ws, id, "session.deleted"); err != nil {
			return err
		}
		// The tables that hold rows of a session go with it.
		for _, table := range []string{"running_tools", "session_leases", "session_workspaces", "tool_calls", "idempotency_keys", "repository_tokens", "session_tokens", "session_threads", "session_memory_stores", "events"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE session_id = ?`, id); err != nil {
				return fmt.Errorf("deleting the session's %s: %w", table, err)
			}
		}
		return nil
	})
}

// SessionIDsByStatus implements store.Sessions.
func (s *Store) SessionIDsByStatus(ctx context.Context, statuses ...string) ([]string, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	var q query
	q.in("status", statuses)
	q.scope(ctx, "workspace_id")
	return collect(ctx, s.r, scanString, `SELECT id FROM sessions`+q.clause()+` ORDER BY pos`, q.args...)
}

// SessionIDsWithPending implements store.Sessions.
func (s *Store) SessionIDsWithPending(ctx context.Context) ([]string, error) {
	return collect(ctx, s.r, scanString, `SELECT DISTINCT session_id FROM events WHERE pending`)
}

// LastSeq implements store.Sessions.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	_, last, err := getSession(ctx, s.r, sessionID, "")
	return last, err
}

// recordMemoryStores records the memory stores the session's
// memory_store resources name, for the sessions list's filter.
func recordMemoryStores(ctx context.Context, tx Querier, sess ma.Session) error {
	for _, raw := range sess.Resources {
		var r struct {
			Type          string `json:"type"`
			MemoryStoreID string `json:"memory_store_id"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("resource of session %s: %w", sess.ID, err)
		}
		if r.Type != "memory_store" {
			continue
		}
		if _, err := tx.Exec(ctx, `INSERT INTO session_memory_stores (session_id, store_id) VALUES (?, ?)`, sess.ID, r.MemoryStoreID); err != nil {
			return err
		}
	}
	return nil
}
