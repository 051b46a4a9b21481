package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// CreateSession implements store.Sessions.
func (s *Store) CreateSession(ctx context.Context, sess ma.Session, fn func(store.Tx) error) (ma.Session, error) {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		body, err := json.Marshal(sess)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (id, status, agent_id, agent_version, environment_id, created_at, archived, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			sess.ID, sess.Status, sess.Agent.ID, sess.Agent.Version, sess.EnvironmentID, unixOf(sess.CreatedAt), sess.ArchivedAt != nil, body); err != nil {
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

// getSession reads a session and its last seq; suffix ends the query (a
// locking clause).
func getSession(ctx context.Context, db querier, id, suffix string) (ma.Session, int64, error) {
	var body []byte
	var last int64
	if err := db.QueryRow(ctx, `SELECT body, last_seq FROM sessions WHERE id = $1`+suffix, id).Scan(&body, &last); err != nil {
		return ma.Session{}, 0, notFound(err, "session", id)
	}
	var sess ma.Session
	err := json.Unmarshal(body, &sess)
	return sess, last, err
}

// GetSession implements store.Sessions.
func (s *Store) GetSession(ctx context.Context, id string) (ma.Session, error) {
	sess, _, err := getSession(ctx, s.pool, id, "")
	return sess, err
}

// ListSessions implements store.Sessions.
func (s *Store) ListSessions(ctx context.Context, sq store.SessionQuery) ([]store.Item[ma.Session], error) {
	var q query
	if !sq.IncludeArchived {
		q.and("NOT archived")
	}
	if sq.AgentID != "" {
		q.and("agent_id = " + q.arg(sq.AgentID))
	}
	if sq.AgentVersion != 0 {
		q.and("agent_version = " + q.arg(sq.AgentVersion))
	}
	if len(sq.Statuses) > 0 {
		q.and("status = ANY(" + q.arg(sq.Statuses) + ")")
	}
	for _, b := range []struct {
		t  *time.Time
		op string
	}{{sq.CreatedGT, ">"}, {sq.CreatedGTE, ">="}, {sq.CreatedLT, "<"}, {sq.CreatedLTE, "<="}} {
		if b.t != nil {
			q.and("created_at " + b.op + " " + q.arg(b.t.UnixNano()))
		}
	}
	tail := q.page("pos", sq.ListQuery)
	return listItems[ma.Session](ctx, s.pool, `SELECT pos, body FROM sessions`+tail, q.args, sq.ListQuery)
}

// UpdateSession implements store.Sessions. The session row stays locked
// until the transaction ends, so concurrent updates, from this process or
// another replica, take turns and never assign the same seq.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	var out ma.Session
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		sess, last, err := getSession(ctx, tx, id, " FOR UPDATE")
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
	return s.withTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("session %s: %w", id, store.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM running_tools WHERE session_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM events WHERE session_id = $1`, id)
		return err
	})
}

// SessionIDsByStatus implements store.Sessions.
func (s *Store) SessionIDsByStatus(ctx context.Context, statuses ...string) ([]string, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	return s.strings(ctx, `SELECT id FROM sessions WHERE status = ANY($1) ORDER BY pos`, statuses)
}

// SessionIDsWithPending implements store.Sessions.
func (s *Store) SessionIDsWithPending(ctx context.Context) ([]string, error) {
	return s.strings(ctx, `SELECT DISTINCT session_id FROM events WHERE pending`)
}

// strings runs a query whose rows are one text column.
func (s *Store) strings(ctx context.Context, sql string, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// LastSeq implements store.Sessions.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	_, last, err := getSession(ctx, s.pool, sessionID, "")
	return last, err
}
