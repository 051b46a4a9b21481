package httpapi

import (
	"context"
	"net/http"
	"slices"

	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// threadStore is what the thread endpoints read of the store.
type threadStore interface {
	GetSession(ctx context.Context, id string) (ma.Session, error)
	ListThreads(ctx context.Context, sessionID string, q store.ThreadQuery) ([]store.Item[ma.SessionThread], error)
	GetThread(ctx context.Context, sessionID, threadID string) (ma.SessionThread, error)
}

// threadArchiver archives threads (sessions.Service).
type threadArchiver interface {
	ArchiveThread(ctx context.Context, sessionID, threadID string) (ma.SessionThread, error)
}

// threadsAPI serves a session's threads: the primary thread, derived from
// the session, and the child threads its delegations started; a thread's
// events and stream are the session's, seen through the thread's view.
type threadsAPI struct {
	st       threadStore
	sessions threadArchiver
	events   *eventsAPI
}

// threadRoutes registers the thread endpoints; e serves the events.
func (s *Server) threadRoutes(e *eventsAPI) {
	t := &threadsAPI{st: s.cfg.Store, sessions: s.cfg.Sessions, events: e}
	s.handle("GET /v1/sessions/{id}/threads", smallBody, t.listThreads)
	s.handle("GET /v1/sessions/{id}/threads/{tid}", smallBody, t.getThread)
	s.handle("POST /v1/sessions/{id}/threads/{tid}/archive", smallBody, noBody(t.archiveThread))
	s.handle("GET /v1/sessions/{id}/threads/{tid}/events", smallBody, t.listEvents)
	s.handle("GET /v1/sessions/{id}/threads/{tid}/stream", smallBody, counted(&s.streams, t.streamEvents))
}

// threadPage is the position of a thread in the list: the primary thread
// comes first, at 1, and a child thread stored at pos at pos+1 (cursor
// positions are positive).
func threadPage(pos int64) int64 { return pos + 1 }

// listThreads serves GET /v1/sessions/{id}/threads: the primary thread,
// then the child threads in creation order, forward pages only.
func (t *threadsAPI) listThreads(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	limit, err := q.limit(1000, 1000)
	if err != nil {
		return err
	}
	statuses, err := q.enums("statuses", "status", sessionStatuses)
	if err != nil {
		return err
	}
	var after int64
	if page := q.str("page"); page != "" {
		c, err := decodeCursor(page, "asc")
		if err != nil {
			return err
		}
		after = c.Pos
	}
	ctx, id := r.Context(), r.PathValue("id")
	var data []ma.SessionThread
	var last int64
	if after == 0 {
		primary, err := t.primary(ctx, id)
		if err != nil {
			return err
		}
		if len(statuses) == 0 || slices.Contains(statuses, primary.Status) {
			data, last = append(data, primary), 1
		}
	}
	tq := store.ThreadQuery{ListQuery: store.ListQuery{After: max(after-1, 0), Limit: limit - len(data)}, Statuses: statuses}
	if tq.Limit > 0 {
		items, err := t.st.ListThreads(ctx, id, tq)
		if err != nil {
			return err
		}
		for _, it := range items {
			data, last = append(data, it.Value), threadPage(it.Pos)
		}
	}
	var next *string
	if len(data) == limit {
		next = cursor{Pos: last, Order: "asc"}.encode()
	}
	if data == nil {
		data = []ma.SessionThread{}
	}
	writeJSON(w, ma.Page[ma.SessionThread]{Data: data, NextPage: next})
	return nil
}

// primary derives the session's primary thread (its usage needs all of
// its child threads').
func (t *threadsAPI) primary(ctx context.Context, sessionID string) (ma.SessionThread, error) {
	sess, err := t.st.GetSession(ctx, sessionID)
	if err != nil {
		return ma.SessionThread{}, err
	}
	var children []ma.SessionThread
	for after := int64(0); ; {
		items, err := t.st.ListThreads(ctx, sessionID, store.ThreadQuery{ListQuery: store.ListQuery{After: after, Limit: 1000}})
		if err != nil {
			return ma.SessionThread{}, err
		}
		for _, it := range items {
			children, after = append(children, it.Value), it.Pos
		}
		if len(items) < 1000 {
			return sessions.PrimaryThread(withStats(sess), children), nil
		}
	}
}

// thread returns the thread the request names, primary or child; a
// thread the session does not have is a 404.
func (t *threadsAPI) thread(r *http.Request) (ma.SessionThread, error) {
	id, tid := r.PathValue("id"), r.PathValue("tid")
	if tid == ma.PrimaryThreadID(id) {
		return t.primary(r.Context(), id)
	}
	return t.st.GetThread(r.Context(), id, tid)
}

func (t *threadsAPI) getThread(w http.ResponseWriter, r *http.Request) error {
	th, err := t.thread(r)
	if err != nil {
		return err
	}
	writeJSON(w, th)
	return nil
}

// archiveThread serves POST …/threads/{tid}/archive: an idle child thread
// only (409 otherwise, as for the primary thread).
func (t *threadsAPI) archiveThread(w http.ResponseWriter, r *http.Request) error {
	th, err := t.sessions.ArchiveThread(r.Context(), r.PathValue("id"), r.PathValue("tid"))
	if err != nil {
		return sessionError(err)
	}
	writeJSON(w, th)
	return nil
}

// listEvents serves GET …/threads/{tid}/events: the session's events
// list, of the thread's view.
func (t *threadsAPI) listEvents(w http.ResponseWriter, r *http.Request) error {
	if _, err := t.thread(r); err != nil {
		return err
	}
	return t.events.listView(w, r, store.ThreadView(r.PathValue("id"), r.PathValue("tid")))
}

// streamEvents serves GET …/threads/{tid}/stream: the session's stream,
// of the thread's view.
func (t *threadsAPI) streamEvents(w http.ResponseWriter, r *http.Request) error {
	if _, err := t.thread(r); err != nil {
		return err
	}
	return t.events.streamView(w, r, store.ThreadView(r.PathValue("id"), r.PathValue("tid")))
}
