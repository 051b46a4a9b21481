package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"database/sql"

	"github.com/reinsdev/reins/internal/ids"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// sessionTx is a store.Tx on the write connection.
type sessionTx struct {
	ctx     context.Context
	tx      *sql.Tx
	sess    ma.Session
	lastSeq int64
}

func (t *sessionTx) Session() *ma.Session { return &t.sess }
func (t *sessionTx) LastSeq() int64       { return t.lastSeq }

func (t *sessionTx) Pending() ([]ma.Event, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT body FROM events WHERE session_id = ? AND pending = 1 ORDER BY seq`, t.sess.ID)
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

func (t *sessionTx) Event(id string) (ma.Event, error) {
	var body []byte
	if err := t.tx.QueryRowContext(t.ctx, `SELECT body FROM events WHERE session_id = ? AND id = ? AND live = 1`, t.sess.ID, id).Scan(&body); err != nil {
		return ma.Event{}, notFound(err, "event", id)
	}
	var ev ma.Event
	err := json.Unmarshal(body, &ev)
	return ev, err
}

func (t *sessionTx) Append(evs ...*ma.Event) error {
	for _, ev := range evs {
		if ev.ID == "" {
			ev.ID = ids.New(ids.Event)
		} else if _, err := t.tx.ExecContext(t.ctx, `UPDATE events SET live = 0, pending = 0 WHERE session_id = ? AND id = ? AND live = 1`, t.sess.ID, ev.ID); err != nil {
			return err
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("event %s: %w", ev.ID, err)
		}
		t.lastSeq++
		var processed any
		if ev.ProcessedAt != nil {
			processed = unixOf(*ev.ProcessedAt)
		}
		if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO events (session_id, seq, id, type, live, pending, processed_at, body) VALUES (?, ?, ?, ?, 1, ?, ?, ?)`,
			t.sess.ID, t.lastSeq, ev.ID, ev.Type, store.IsPending(ev), processed, body); err != nil {
			return err
		}
	}
	return nil
}

// write stores the session row at the end of a transaction.
func (t *sessionTx) write() error {
	body, err := json.Marshal(t.sess)
	if err != nil {
		return err
	}
	archived := 0
	if t.sess.ArchivedAt != nil {
		archived = 1
	}
	_, err = t.tx.ExecContext(t.ctx, `UPDATE sessions SET status = ?, archived = ?, last_seq = ?, body = ? WHERE id = ?`,
		t.sess.Status, archived, t.lastSeq, body, t.sess.ID)
	return err
}

// ListEvents implements store.Sessions.
func (s *Store) ListEvents(ctx context.Context, sessionID string, q store.EventQuery) ([]store.Entry, error) {
	if _, _, err := getSession(ctx, s.r, sessionID); err != nil {
		return nil, err
	}
	where := []string{"session_id = ?", "live = 1"}
	args := []any{sessionID}
	if len(q.Types) > 0 {
		where = append(where, "type IN (?"+strings.Repeat(",?", len(q.Types)-1)+")")
		for _, t := range q.Types {
			args = append(args, t)
		}
	}
	for _, b := range []struct {
		t  *time.Time
		op string
	}{{q.GT, ">"}, {q.GTE, ">="}, {q.LT, "<"}, {q.LTE, "<="}} {
		if b.t != nil {
			where, args = append(where, "processed_at "+b.op+" ?"), append(args, b.t.UnixNano())
		}
	}
	where, args, tail := page(where, args, "seq", store.ListQuery{After: q.After, Before: q.Before, Desc: q.Desc, Limit: q.Limit})
	entries, err := s.entries(ctx, `SELECT seq, body FROM events`+whereClause(where)+tail, args...)
	if err == nil && q.Before > 0 && q.After == 0 {
		reverse(entries)
	}
	return entries, err
}

// ReadLog implements store.Sessions.
func (s *Store) ReadLog(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error) {
	return s.entries(ctx, `SELECT seq, body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sessionID, after, limit)
}

// ReadLogRaw implements store.Sessions.
func (s *Store) ReadLogRaw(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT seq, id, type, body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sessionID, after, limit)
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

func (s *Store) entries(ctx context.Context, query string, args ...any) ([]store.Entry, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
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
