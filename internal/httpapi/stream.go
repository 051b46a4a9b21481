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

// streamEvents serves GET /v1/sessions/{id}/events/stream: a live tail of
// the session's log from "now" (or from Last-Event-ID, a seq, as an
// extension), with optional previews.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.PathValue("id")
	deltas, err := query{r}.enums("event_deltas", "delta type", deltaTypes)
	if err != nil {
		return err
	}
	if len(deltas) > 100 {
		return badRequest("event_deltas[]: at most 100 values, got %d", len(deltas))
	}
	cursor, err := s.cfg.Store.LastSeq(ctx, id)
	if err != nil {
		return err
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("Last-Event-ID: must be an event sequence number from this stream; got %q", v)
		}
		cursor = min(n, cursor)
	}
	tl, news, release, err := s.tails.subscribe(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	var previews <-chan ma.Preview
	if len(deltas) > 0 {
		ch, cancel := s.cfg.Harness.Previews().Subscribe(id)
		defer cancel()
		previews = ch
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 32<<10)
	// A client that stops reading loses the stream instead of pinning
	// this handler. The deadline is set before writing too: a large
	// event goes past the buffer, straight to the connection.
	deadline := func() { rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }
	flush := func() error {
		deadline()
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := flush(); err != nil {
		return nil
	}

	// A stream waiting for the event budget stops waiting at shutdown.
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.tails.ctx, cancel)()

	started := map[string]bool{} // preview ids announced on this connection
	finished := map[string]bool{}
	// drain sends every new log entry; it reports whether the stream must
	// end (session deleted, or writing failed).
	drain := func() bool {
		for {
			entries, deleted, ok := tl.since(cursor)
			release := func() {}
			if !ok {
				var err error
				if entries, release, err = s.readLog(readCtx, id, cursor); err != nil {
					// The database away is a pause: the stream reads
					// again at the next change or poll, from its cursor.
					return !errors.Is(err, store.ErrUnavailable)
				}
				if len(entries) == 0 && !deleted {
					return false // deleted meanwhile: the tail's next read tells
				}
			}
			if len(entries) > 0 {
				deadline()
			}
			for _, e := range entries {
				writeFrame(bw, strconv.FormatInt(e.Seq, 10), e.Event.Type, e.Raw)
				cursor = e.Seq
				if e.Event.Type == ma.EventAgentMessage || e.Event.Type == ma.EventAgentThinking {
					finished[e.Event.ID] = true
				}
			}
			if len(entries) > 0 {
				err := flush()
				release()
				if err != nil {
					return true
				}
			}
			if ok || len(entries) == 0 {
				if deleted && len(entries) == 0 {
					now := ma.Time(time.Now())
					b, _ := json.Marshal(ma.Event{Type: ma.EventSessionDeleted, ID: ids.New(ids.Event), ProcessedAt: &now})
					writeFrame(bw, "", ma.EventSessionDeleted, b)
					flush()
					return true
				}
				if ok {
					return false
				}
			}
		}
	}
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	who := principal(r)
	recheck := time.NewTicker(s.cfg.Auth.RecheckInterval())
	defer recheck.Stop()
	if drain() {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case <-recheck.C:
			if s.revoked(ctx, bw, r, who) {
				flush()
				return nil
			}
		case <-news:
			if drain() {
				return nil
			}
		case <-ping.C:
			writeFrame(bw, "", "ping", []byte(`{"type":"ping"}`))
			if err := flush(); err != nil {
				return nil
			}
		case pv := <-previews:
			var eventID string
			switch pv.Type {
			case "event_start":
				eventID = pv.Event.ID
				if !slices.Contains(deltas, pv.Event.Type) || started[eventID] || finished[eventID] {
					continue
				}
				// Events committed before this preview go first, so
				// that span.model_request_start precedes event_start.
				tl.read(ctx)
				if drain() {
					return nil
				}
				if finished[eventID] {
					continue // its final event went out first
				}
				started[eventID] = true
			case "event_delta":
				eventID = pv.EventID
				if !started[eventID] || finished[eventID] {
					continue
				}
			}
			b, _ := json.Marshal(pv)
			writeFrame(bw, "", pv.Type, b)
			// Flush previews at once only when no more are queued.
			if len(previews) == 0 {
				if err := flush(); err != nil {
					return nil
				}
			}
		}
	}
}

// readLog reads a stream's next log entries after seq from the store: at
// most streamChunkBytes of them, or a larger entry alone, shared with the
// other streams that send it at once (largeReads). release lets go of that
// entry; call it once the entries are written. No entries and no error:
// the session was deleted.
func (s *Server) readLog(ctx context.Context, id string, after int64) (entries []store.Entry, release func(), err error) {
	release = func() {}
	entries, err = s.cfg.Store.ReadLogRaw(ctx, id, after, streamBatch, streamChunkBytes)
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
	e, release, err := s.mem.large.get(ctx, id, head)
	if errors.Is(err, errEntryGone) {
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return []store.Entry{e}, release, nil
}

// revoked checks again the key a stream was opened with. Once it is
// refused (revoked, or its environment archived or deleted), revoked
// writes the error frame that ends the stream, so that the SDKs raise it
// instead of waiting on a silent connection, and reports true. A store
// that cannot answer does not end the stream.
func (s *Server) revoked(ctx context.Context, bw *bufio.Writer, r *http.Request, who Principal) bool {
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
	writeFrame(bw, "", "error", b)
	return true
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
