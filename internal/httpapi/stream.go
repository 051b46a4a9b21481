package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// streamBatch bounds the log entries read per store round trip.
const streamBatch = 500

// streamWriteTimeout bounds one flush to a stream's client.
const streamWriteTimeout = 30 * time.Second

// stream is one event stream being served: a live tail of a session's log
// from its cursor, and the previews of the event types it asked deltas
// of. Its handler's goroutine alone uses it.
type stream struct {
	e      *eventsAPI
	r      *http.Request
	id     string     // the session
	view   store.View // the part of the session's log it sends
	deltas []string   // the event types whose previews it sends
	cursor int64      // the seq of the last log entry sent (or skipped: not in the view)

	tl       *tail
	news     <-chan struct{}   // the tail has read new entries
	previews <-chan ma.Preview // nil: no previews asked (or none served)
	// readCtx bounds the stream's reads of the store: it ends with the
	// request, and at shutdown (a stream waiting for the event budget
	// stops waiting).
	readCtx context.Context

	rc *http.ResponseController
	bw *bufio.Writer

	started  map[string]bool // preview ids announced on this connection
	finished map[string]bool // ids of the final events sent (no more previews)
}

// streamEvents serves GET /v1/sessions/{id}/events/stream: a live tail of
// the session's stream (store.SessionView) from "now" (or from
// Last-Event-ID, a seq, as an extension), with optional previews.
func (e *eventsAPI) streamEvents(w http.ResponseWriter, r *http.Request) error {
	return e.streamView(w, r, store.SessionView())
}

// streamView serves a live tail of one view of the session's log: the
// session's stream or a thread's. Every stream of a session shares the
// session's one tail.
func (e *eventsAPI) streamView(w http.ResponseWriter, r *http.Request, v store.View) error {
	st, err := e.newStream(r, v)
	if err != nil {
		return err
	}
	var release func()
	if st.tl, st.news, release, err = e.s.tails.subscribe(r.Context(), st.id); err != nil {
		return err
	}
	defer release()
	if len(st.deltas) > 0 && e.previews != nil {
		ch, cancel := e.previews.Subscribe(st.id)
		defer cancel()
		st.previews = ch
	}
	if err := st.start(w); err != nil {
		return nil // the client is gone
	}
	readCtx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(e.s.tails.ctx, cancel)()
	st.readCtx = readCtx
	st.follow()
	return nil
}

// newStream reads a stream's parameters: the event types it wants deltas
// of (event_deltas[]) and where it starts, the log's end or, if before,
// Last-Event-ID.
func (e *eventsAPI) newStream(r *http.Request, v store.View) (*stream, error) {
	id := r.PathValue("id")
	deltas, err := query{r}.enums("event_deltas", "delta type", deltaTypes)
	if err != nil {
		return nil, err
	}
	if len(deltas) > 100 {
		return nil, badRequest("event_deltas[]: at most 100 values, got %d", len(deltas))
	}
	cursor, err := e.st.LastSeq(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, badRequest("Last-Event-ID: must be an event sequence number from this stream; got %q", v)
		}
		cursor = min(n, cursor)
	}
	return &stream{e: e, r: r, id: id, view: v, deltas: deltas, cursor: cursor, started: map[string]bool{}, finished: map[string]bool{}}, nil
}

// start answers 200 with the stream's headers.
func (st *stream) start(w http.ResponseWriter) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	st.rc = http.NewResponseController(w)
	st.bw = bufio.NewWriterSize(w, 32<<10)
	return st.flush()
}

// deadline bounds the next writes: a client that stops reading loses the
// stream instead of pinning its handler. It is set before writing too: a
// large event goes past the buffer, straight to the connection.
func (st *stream) deadline() { st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }

// flush sends what is written to the client.
func (st *stream) flush() error {
	st.deadline()
	if err := st.bw.Flush(); err != nil {
		return err
	}
	return st.rc.Flush()
}

// follow sends the log's entries as they come, the previews, and pings,
// until the client leaves, the server shuts down, the session is deleted
// or the stream's key is refused.
func (st *stream) follow() {
	ctx := st.r.Context()
	ping := time.NewTicker(st.e.s.cfg.PingInterval)
	defer ping.Stop()
	who := principal(st.r)
	recheck := time.NewTicker(st.e.s.cfg.Auth.RecheckInterval())
	defer recheck.Stop()
	if st.drain() {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.e.s.done:
			return
		case <-recheck.C:
			if st.revoked(who) {
				st.flush()
				return
			}
		case <-st.news:
			if st.drain() {
				return
			}
		case <-ping.C:
			writeFrame(st.bw, "", "ping", []byte(`{"type":"ping"}`))
			if err := st.flush(); err != nil {
				return
			}
		case pv := <-st.previews:
			if st.preview(pv) {
				return
			}
		}
	}
}

// drain sends every log entry after the cursor; it reports whether the
// stream must end (session deleted, or writing failed).
func (st *stream) drain() (end bool) {
	for {
		entries, deleted, fromRing, release, err := st.next()
		if err != nil {
			// The database away is a pause: the stream reads again at
			// the next change or poll, from its cursor.
			return !errors.Is(err, store.ErrUnavailable)
		}
		if len(entries) > 0 {
			err := st.writeEntries(entries)
			release()
			if err != nil {
				return true
			}
			if fromRing {
				return false
			}
			continue // more may follow in the store
		}
		if deleted {
			st.writeDeleted()
			return true
		}
		return false // nothing new (or deleted meanwhile: the tail's next read tells)
	}
}

// next returns the entries of the stream's view after the cursor: from
// the tail's ring when it holds them all (fromRing), else read from the
// store. deleted is what the tail knows of the session. release lets go of
// the entries once written. Entries of the ring outside the view are
// passed over: the cursor moves past them.
func (st *stream) next() (entries []store.Entry, deleted, fromRing bool, release func(), err error) {
	entries, deleted, fromRing = st.tl.since(st.cursor)
	if fromRing {
		if n := len(entries); n > 0 {
			last := entries[n-1].Seq
			if entries = slices.DeleteFunc(entries, func(e store.Entry) bool { return !st.view.Includes(e) }); len(entries) == 0 {
				st.cursor = last
			}
		}
		return entries, deleted, true, func() {}, nil
	}
	entries, release, err = st.e.readLog(st.readCtx, st.id, st.view, st.cursor)
	return entries, deleted, false, release, err
}

// writeEntries sends log entries and moves the cursor past them.
func (st *stream) writeEntries(entries []store.Entry) error {
	st.deadline()
	for _, e := range entries {
		writeFrame(st.bw, strconv.FormatInt(e.Seq, 10), e.Event.Type, e.Raw)
		st.cursor = e.Seq
		if e.Event.Type == ma.EventAgentMessage || e.Event.Type == ma.EventAgentThinking {
			st.finished[e.Event.ID] = true
		}
	}
	return st.flush()
}

// writeDeleted sends the session.deleted event that ends the stream of a
// deleted session.
func (st *stream) writeDeleted() {
	now := ma.Time(time.Now())
	b, _ := json.Marshal(ma.Event{Type: ma.EventSessionDeleted, ID: ids.New(ids.Event), ProcessedAt: &now})
	writeFrame(st.bw, "", ma.EventSessionDeleted, b)
	st.flush()
}

// preview sends a preview, if the stream asked for its event type and
// the event's final version has not gone out; it reports whether the
// stream must end. The events committed before a preview's start go
// first, so that span.model_request_start precedes event_start.
func (st *stream) preview(pv ma.Preview) (end bool) {
	switch pv.Type {
	case "event_start":
		id := pv.Event.ID
		if !slices.Contains(st.deltas, pv.Event.Type) || !st.view.IncludesPreview(pv) || st.started[id] || st.finished[id] {
			return false
		}
		st.tl.read(st.r.Context())
		if st.drain() {
			return true
		}
		if st.finished[id] {
			return false // its final event went out first
		}
		st.started[id] = true
	case "event_delta":
		if !st.started[pv.EventID] || st.finished[pv.EventID] {
			return false
		}
	}
	b, _ := json.Marshal(pv)
	writeFrame(st.bw, "", pv.Type, b)
	// Flush previews at once only when no more are queued.
	if len(st.previews) == 0 {
		return st.flush() != nil
	}
	return false
}

// revoked checks again the key the stream was opened with. Once it is
// refused (revoked, or its environment archived or deleted), revoked
// writes the error frame that ends the stream, so that the SDKs raise it
// instead of waiting on a silent connection, and reports true. A store
// that cannot answer does not end the stream.
func (st *stream) revoked(who Principal) bool {
	ctx, r, s := st.r.Context(), st.r, st.e.s
	err := s.cfg.Auth.RecheckPrincipal(ctx, who)
	var ae *apiError
	if err == nil || !errors.As(err, &ae) {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("recheck a stream's key", "request_id", requestID(r), "err", err)
		}
		return false
	}
	s.log.Info("stream ended: its key was refused", "path", r.URL.Path, "request_id", requestID(r), "err", err)
	b, _ := json.Marshal(ma.ErrorEnvelope{Type: "error", Error: ma.ErrorBody{Type: ae.typ, Message: ae.message}, RequestID: requestID(r)})
	writeFrame(st.bw, "", "error", b)
	return true
}

// readLog reads a stream's next log entries of the view v after seq from
// the store: at most streamChunkBytes of them, or a larger entry alone,
// shared with the other streams that send it at once (largeReads).
// release lets go of that entry; call it once the entries are written. No
// entries and no error: the session was deleted.
func (e *eventsAPI) readLog(ctx context.Context, id string, v store.View, after int64) (entries []store.Entry, release func(), err error) {
	release = func() {}
	entries, err = e.st.ReadViewRaw(ctx, id, v, after, streamBatch, streamChunkBytes)
	if err != nil || len(entries) == 0 {
		return nil, release, err
	}
	head := entries[len(entries)-1]
	if !head.Head() {
		return entries, release, nil
	}
	if len(entries) > 1 {
		return entries[:len(entries)-1], release, nil // the next read starts at the head
	}
	en, release, err := e.s.mem.large.get(ctx, id, head)
	if errors.Is(err, errEntryGone) {
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return []store.Entry{en}, release, nil
}

func writeFrame(w *bufio.Writer, id, event string, data []byte) {
	if id != "" {
		w.WriteString("id: ")
		w.WriteString(id)
		w.WriteByte('\n')
	}
	w.WriteString("event: ")
	w.WriteString(event)
	w.WriteString("\ndata: ")
	w.Write(data)
	w.WriteString("\n\n")
}
