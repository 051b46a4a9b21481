package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// sessionTx is a store.Tx in a write transaction that read (and, where the
// driver locks rows, locked) the session row.
type sessionTx struct {
	s       *Store
	ctx     context.Context
	tx      Querier
	sess    ma.Session
	lastSeq int64
	// workspace is the session's workspace, read when first needed
	// (emit).
	workspace string
}

// Session implements store.Tx.
func (t *sessionTx) Session() *ma.Session { return &t.sess }

// LastSeq implements store.Tx.
func (t *sessionTx) LastSeq() int64 { return t.lastSeq }

// Pending implements store.Tx.
func (t *sessionTx) Pending() ([]ma.Event, error) {
	return collect(t.ctx, t.tx, scanJSON[ma.Event], `SELECT body FROM events WHERE session_id = ? AND pending ORDER BY seq`, t.sess.ID)
}

// Event implements store.Tx.
func (t *sessionTx) Event(id string) (ma.Event, error) {
	ev, err := scanJSON[ma.Event](t.tx.QueryRow(t.ctx, `SELECT body FROM events WHERE session_id = ? AND id = ? AND live`, t.sess.ID, id))
	if err != nil {
		return ma.Event{}, notFound(err, "event", id)
	}
	return ev, nil
}

// ReadLog implements store.Tx: the entries after a seq, in this
// transaction.
func (t *sessionTx) ReadLog(after int64) ([]store.Entry, error) {
	return collect(t.ctx, t.tx, scanEntry, `SELECT `+entryCols+` FROM events WHERE session_id = ? AND seq > ? ORDER BY seq`, t.sess.ID, after)
}

// Append implements store.Tx. An event whose id is already in the log
// supersedes the live entry of that id.
func (t *sessionTx) Append(evs ...*ma.Event) error {
	for _, ev := range evs {
		if ev.ID == "" {
			ev.ID = ids.New(ids.Event)
		} else if _, err := t.tx.Exec(t.ctx, `UPDATE events SET live = FALSE, pending = FALSE WHERE session_id = ? AND id = ? AND live`, t.sess.ID, ev.ID); err != nil {
			return err
		}
		if err := t.insert(ev); err != nil {
			return err
		}
		t.lastSeq++
		if err := t.emit(sessionEventWebhooks(ev)...); err != nil {
			return err
		}
	}
	return nil
}

// insert writes ev as the next entry of the log.
func (t *sessionTx) insert(ev *ma.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("event %s: %w", ev.ID, err)
	}
	var processed any
	if ev.ProcessedAt != nil {
		processed = unixOf(*ev.ProcessedAt)
	}
	seq := t.lastSeq + 1
	_, err = t.tx.Exec(t.ctx, `INSERT INTO events (session_id, seq, id, type, live, pending, processed_at, thread_id, on_session, body) VALUES (?, ?, ?, ?, TRUE, ?, ?, ?, ?, ?)`,
		t.sess.ID, seq, ev.ID, ev.Type, store.IsPending(ev), processed, ma.StreamThread(t.sess.ID, ev), ma.OnSessionStream(ev), body)
	return t.s.conflict(err, fmt.Sprintf("event seq %d of session %s", seq, t.sess.ID))
}

// write stores the session row at the end of a transaction.
func (t *sessionTx) write() error {
	body, err := json.Marshal(t.sess)
	if err != nil {
		return err
	}
	var stop any
	if t.sess.StopReason != nil {
		stop = t.sess.StopReason.Type
	}
	_, err = t.tx.Exec(t.ctx, `UPDATE sessions SET status = ?, stop_reason = ?, archived = ?, last_seq = ?, body = ? WHERE id = ?`,
		t.sess.Status, stop, t.sess.ArchivedAt != nil, t.lastSeq, body, t.sess.ID)
	return err
}

// MarkToolRunning implements store.Tx.
func (t *sessionTx) MarkToolRunning(toolUseID string) error {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO running_tools (session_id, tool_use_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, t.sess.ID, toolUseID)
	return err
}

// UnmarkToolRunning implements store.Tx.
func (t *sessionTx) UnmarkToolRunning(toolUseID string) error {
	if toolUseID == "" {
		_, err := t.tx.Exec(t.ctx, `DELETE FROM running_tools WHERE session_id = ?`, t.sess.ID)
		return err
	}
	_, err := t.tx.Exec(t.ctx, `DELETE FROM running_tools WHERE session_id = ? AND tool_use_id = ?`, t.sess.ID, toolUseID)
	return err
}

// ToolsRunning implements store.Tx.
func (t *sessionTx) ToolsRunning() ([]string, error) {
	return collect(t.ctx, t.tx, scanString, `SELECT tool_use_id FROM running_tools WHERE session_id = ? ORDER BY tool_use_id`, t.sess.ID)
}

// ListEvents implements store.Sessions.
func (s *Store) ListEvents(ctx context.Context, sessionID string, eq store.EventQuery) ([]store.Entry, error) {
	if _, _, err := getSession(ctx, s.r, sessionID, ""); err != nil {
		return nil, err
	}
	cols, scan := entryCols, scanEntry
	if eq.Raw {
		cols, scan = rawCols, scanRawEntry
	}
	l := store.ListQuery{After: eq.After, Before: eq.Before, Desc: eq.Desc, Limit: eq.Limit}
	if eq.MaxBytes <= 0 {
		return list(ctx, s.r, scan, `SELECT `+cols+` FROM events`, "seq", eventFilter(sessionID, eq), l)
	}
	hq := eventFilter(sessionID, eq)
	heads, err := collect(ctx, s.r, scanHead, `SELECT `+headCols+` FROM events`+hq.page("seq", l), hq.args...)
	if err != nil {
		return nil, err
	}
	out, err := withinBytes(heads, eq.MaxBytes, func(fit []store.Entry) ([]store.Entry, error) {
		// The bodies of the entries the heads read, by seq: not the filter
		// again, whose "live" an entry superseded since then no longer
		// meets (its new echo lies past the page, so the list would lose
		// it). An entry's row never changes but for its live and pending
		// flags, so the page is the log as the heads read it.
		var q query
		q.and("session_id = ?", sessionID)
		q.and("seq IN (?"+strings.Repeat(", ?", len(fit)-1)+")", seqsOf(fit)...)
		dir := "ASC"
		if eq.Desc != backwards(l) {
			dir = "DESC"
		}
		return collect(ctx, s.r, scan, `SELECT `+cols+` FROM events`+q.clause()+` ORDER BY seq `+dir, q.args...)
	})
	if err == nil && backwards(l) {
		slices.Reverse(out)
	}
	return out, err
}

// eventFilter is the WHERE clause of a ListEvents query, without its page.
func eventFilter(sessionID string, eq store.EventQuery) *query {
	var q query
	q.and("session_id = ?", sessionID)
	q.and("live")
	q.view(eq.View)
	if len(eq.Types) > 0 {
		q.in("type", eq.Types)
	}
	q.since("processed_at", eq.GT, eq.GTE, eq.LT, eq.LTE)
	return &q
}

// ReadLog implements store.Sessions.
func (s *Store) ReadLog(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error) {
	cond, args := inParentWorkspace(ctx, "session_id", "sessions")
	args = append([]any{sessionID, after}, append(args, limit)...)
	return collect(ctx, s.r, scanEntry, `SELECT `+entryCols+` FROM events WHERE session_id = ? AND seq > ?`+cond+` ORDER BY seq LIMIT ?`, args...)
}

// ReadLogRaw implements store.Sessions.
func (s *Store) ReadLogRaw(ctx context.Context, sessionID string, after int64, limit int, maxBytes int64) ([]store.Entry, error) {
	return s.ReadViewRaw(ctx, sessionID, store.View{}, after, limit, maxBytes)
}

// ReadViewRaw implements store.Sessions.
func (s *Store) ReadViewRaw(ctx context.Context, sessionID string, v store.View, after int64, limit int, maxBytes int64) ([]store.Entry, error) {
	var q query
	q.and("session_id = ? AND seq > ?", sessionID, after)
	q.view(v)
	q.scopeParent(ctx, "session_id", "sessions")
	from, args := ` FROM events`+q.clause(), q.args
	if maxBytes <= 0 {
		return collect(ctx, s.r, scanRawEntry, `SELECT `+rawCols+from+` ORDER BY seq LIMIT ?`, append(args, limit)...)
	}
	heads, err := collect(ctx, s.r, scanHead, `SELECT `+headCols+from+` ORDER BY seq LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	return withinBytes(heads, maxBytes, func(fit []store.Entry) ([]store.Entry, error) {
		hi := fit[len(fit)-1].Seq
		return collect(ctx, s.r, scanRawEntry, `SELECT `+rawCols+from+` AND seq <= ? ORDER BY seq`, append(args, hi)...)
	})
}

// withinBytes applies a read's byte budget (the rule is store.Entry's):
// heads are the entries of the read without their JSON, in read order;
// bodies reads, with their JSON and in read order, the entries fit (the
// first heads, which fit in the budget). The JSON of the heads past the
// budget is never read.
func withinBytes(heads []store.Entry, maxBytes int64, bodies func(fit []store.Entry) ([]store.Entry, error)) ([]store.Entry, error) {
	n, total := 0, int64(0)
	for n < len(heads) && total+heads[n].Size <= maxBytes {
		total += heads[n].Size
		n++
	}
	var out []store.Entry
	if n > 0 {
		var err error
		if out, err = bodies(heads[:n]); err != nil {
			return nil, err
		}
	}
	if n < len(heads) {
		out = append(out, heads[n])
	}
	return out, nil
}

// view adds the conditions of the view v.
func (q *query) view(v store.View) {
	if v.IsSession() {
		q.and("on_session")
	} else if th, ok := v.Thread(); ok {
		q.and("thread_id = ?", th)
	}
}

// headCols are the columns scanHead reads; rawCols scanRawEntry's;
// entryCols scanEntry's.
const (
	headCols  = "seq, id, type, thread_id, on_session, length(body)"
	rawCols   = "seq, id, type, thread_id, on_session, body"
	entryCols = "seq, thread_id, on_session, body"
)

// scanEntry scans the entryCols and decodes the event.
func scanEntry(row Row) (store.Entry, error) {
	var e store.Entry
	if err := row.Scan(&e.Seq, &e.Thread, &e.OnSession, &e.Raw); err != nil {
		return e, err
	}
	e.Size = int64(len(e.Raw))
	err := json.Unmarshal(e.Raw, &e.Event)
	return e, err
}

// scanRawEntry scans the rawCols without decoding the event.
func scanRawEntry(row Row) (store.Entry, error) {
	var e store.Entry
	err := row.Scan(&e.Seq, &e.Event.ID, &e.Event.Type, &e.Thread, &e.OnSession, &e.Raw)
	e.Size = int64(len(e.Raw))
	return e, err
}

// scanHead scans the headCols: an entry without its JSON.
func scanHead(row Row) (store.Entry, error) {
	var e store.Entry
	err := row.Scan(&e.Seq, &e.Event.ID, &e.Event.Type, &e.Thread, &e.OnSession, &e.Size)
	return e, err
}

// seqsOf returns the seqs of entries, as statement arguments.
func seqsOf(entries []store.Entry) []any {
	seqs := make([]any, len(entries))
	for i, e := range entries {
		seqs[i] = e.Seq
	}
	return seqs
}
