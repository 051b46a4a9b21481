package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reinsdev/reins/internal/ids"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// sessionTx is a store.Tx in a transaction holding the session row's lock.
type sessionTx struct {
	ctx     context.Context
	tx      pgx.Tx
	sess    ma.Session
	lastSeq int64
}

// Session implements store.Tx.
func (t *sessionTx) Session() *ma.Session { return &t.sess }

// LastSeq implements store.Tx.
func (t *sessionTx) LastSeq() int64 { return t.lastSeq }

// Pending implements store.Tx.
func (t *sessionTx) Pending() ([]ma.Event, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT body FROM events WHERE session_id = $1 AND pending ORDER BY seq`, t.sess.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ma.Event
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		var ev ma.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Event implements store.Tx.
func (t *sessionTx) Event(id string) (ma.Event, error) {
	var ev ma.Event
	if err := getJSON(t.ctx, t.tx, &ev, `SELECT body FROM events WHERE session_id = $1 AND id = $2 AND live`, t.sess.ID, id); err != nil {
		return ma.Event{}, notFound(err, "event", id)
	}
	return ev, nil
}

// Append implements store.Tx. An event whose id is already in the log
// supersedes the live entry of that id.
func (t *sessionTx) Append(evs ...*ma.Event) error {
	for _, ev := range evs {
		if ev.ID == "" {
			ev.ID = ids.New(ids.Event)
		} else if _, err := t.tx.Exec(t.ctx, `UPDATE events SET live = false, pending = false WHERE session_id = $1 AND id = $2 AND live`, t.sess.ID, ev.ID); err != nil {
			return err
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("event %s: %w", ev.ID, err)
		}
		var processed any
		if ev.ProcessedAt != nil {
			processed = unixOf(*ev.ProcessedAt)
		}
		if _, err := t.tx.Exec(t.ctx, `INSERT INTO events (session_id, seq, id, type, live, pending, processed_at, body) VALUES ($1, $2, $3, $4, true, $5, $6, $7)`,
			t.sess.ID, t.lastSeq+1, ev.ID, ev.Type, store.IsPending(ev), processed, body); err != nil {
			if isUnique(err) {
				return fmt.Errorf("event seq %d of session %s: %w", t.lastSeq+1, t.sess.ID, store.ErrConflict)
			}
			return err
		}
		t.lastSeq++
	}
	return nil
}

// write stores the session row at the end of a transaction.
func (t *sessionTx) write() error {
	body, err := json.Marshal(t.sess)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `UPDATE sessions SET status = $1, archived = $2, last_seq = $3, body = $4 WHERE id = $5`,
		t.sess.Status, t.sess.ArchivedAt != nil, t.lastSeq, body, t.sess.ID)
	return err
}

// ListEvents implements store.Sessions.
func (s *Store) ListEvents(ctx context.Context, sessionID string, eq store.EventQuery) ([]store.Entry, error) {
	if _, _, err := getSession(ctx, s.pool, sessionID, ""); err != nil {
		return nil, err
	}
	var q query
	q.and("session_id = " + q.arg(sessionID))
	q.and("live")
	if len(eq.Types) > 0 {
		q.and("type = ANY(" + q.arg(eq.Types) + ")")
	}
	for _, b := range []struct {
		t  *time.Time
		op string
	}{{eq.GT, ">"}, {eq.GTE, ">="}, {eq.LT, "<"}, {eq.LTE, "<="}} {
		if b.t != nil {
			q.and("processed_at " + b.op + " " + q.arg(b.t.UnixNano()))
		}
	}
	l := store.ListQuery{After: eq.After, Before: eq.Before, Desc: eq.Desc, Limit: eq.Limit}
	entries, err := s.entries(ctx, `SELECT seq, body FROM events`+q.page("seq", l), q.args...)
	if err != nil {
		return nil, err
	}
	if backwards(l) {
		reverse(entries)
	}
	return entries, nil
}

// ReadLog implements store.Sessions.
func (s *Store) ReadLog(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error) {
	return s.entries(ctx, `SELECT seq, body FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, after, limit)
}

// ReadLogRaw implements store.Sessions.
func (s *Store) ReadLogRaw(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, id, type, body FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Entry
	for rows.Next() {
		var e store.Entry
		if err := rows.Scan(&e.Seq, &e.Event.ID, &e.Event.Type, &e.Raw); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *Store) entries(ctx context.Context, sql string, args ...any) ([]store.Entry, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Entry
	for rows.Next() {
		var e store.Entry
		if err := rows.Scan(&e.Seq, &e.Raw); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(e.Raw, &e.Event); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
