package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// CreateSession implements store.Sessions.
func (s *Store) CreateSession(ctx context.Context, sess ma.Session, fn func(store.Tx) error) (ma.Session, error) {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		body, err := json.Marshal(sess)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, status, agent_id, agent_version, environment_id, created_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			sess.ID, sess.Status, sess.Agent.ID, sess.Agent.Version, sess.EnvironmentID, unixOf(sess.CreatedAt), body); err != nil {
			if isUnique(err) {
				return fmt.Errorf("session %s: %w", sess.ID, store.ErrConflict)
			}
			return err
		}
		if fn == nil {
			return nil
		}
		t := &sessionTx{ctx: ctx, tx: tx, sess: sess}
		if err := fn(t); err != nil {
			return err
		}
		sess = t.sess
		return t.write()
	})
	return sess, err
}

func getSession(ctx context.Context, q querier, id string) (ma.Session, int64, error) {
	var body []byte
	var last int64
	if err := q.QueryRowContext(ctx, `SELECT body, last_seq FROM sessions WHERE id = ?`, id).Scan(&body, &last); err != nil {
		return ma.Session{}, 0, notFound(err, "session", id)
	}
	var sess ma.Session
	err := json.Unmarshal(body, &sess)
	return sess, last, err
}

// GetSession implements store.Sessions.
func (s *Store) GetSession(ctx context.Context, id string) (ma.Session, error) {
	sess, _, err := getSession(ctx, s.r, id)
	return sess, err
}

// ListSessions implements store.Sessions.
func (s *Store) ListSessions(ctx context.Context, q store.SessionQuery) ([]store.Item[ma.Session], error) {
	var where []string
	var args []any
	if !q.IncludeArchived {
		where = append(where, "archived = 0")
	}
	if q.AgentID != "" {
		where, args = append(where, "agent_id = ?"), append(args, q.AgentID)
	}
	if q.AgentVersion != 0 {
		where, args = append(where, "agent_version = ?"), append(args, q.AgentVersion)
	}
	if len(q.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(",?", len(q.Statuses)-1)+")")
		for _, st := range q.Statuses {
			args = append(args, st)
		}
	}
	for _, b := range []struct {
		t  *time.Time
		op string
	}{{q.CreatedGT, ">"}, {q.CreatedGTE, ">="}, {q.CreatedLT, "<"}, {q.CreatedLTE, "<="}} {
		if b.t != nil {
			where, args = append(where, "created_at "+b.op+" ?"), append(args, b.t.UnixNano())
		}
	}
	where, args, tail := page(where, args, "pos", q.ListQuery)
	return listItems[ma.Session](ctx, s.r, `SELECT pos, body FROM sessions`+whereClause(where)+tail, args, q.ListQuery)
}

// UpdateSession implements store.Sessions.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	var out ma.Session
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		sess, last, err := getSession(ctx, tx, id)
		if err != nil {
			return err
		}
		t := &sessionTx{ctx: ctx, tx: tx, sess: sess, lastSeq: last}
		if err := fn(t); err != nil {
			return err
		}
		out = t.sess
		return t.write()
	})
	return out, err
}

// DeleteSession implements store.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("session %s: %w", id, store.ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM running_tools WHERE session_id = ?`, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM events WHERE session_id = ?`, id)
		return err
	})
}

// SessionIDsByStatus implements store.Sessions.
func (s *Store) SessionIDsByStatus(ctx context.Context, statuses ...string) ([]string, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	args := make([]any, len(statuses))
	for i, st := range statuses {
		args[i] = st
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM sessions WHERE status IN (?`+strings.Repeat(",?", len(statuses)-1)+`) ORDER BY pos`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// SessionIDsWithPending implements store.Sessions.
func (s *Store) SessionIDsWithPending(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT session_id FROM events WHERE pending = 1`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// LastSeq implements store.Sessions.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	_, last, err := getSession(ctx, s.r, sessionID)
	return last, err
}
