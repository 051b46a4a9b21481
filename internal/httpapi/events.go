package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// maxEventsPerRequest bounds one send.
const maxEventsPerRequest = 100

// eventStore is what the event endpoints read of the store.
type eventStore interface {
	rubricFiles
	ListEvents(ctx context.Context, sessionID string, q store.EventQuery) ([]store.Entry, error)
	ReadViewRaw(ctx context.Context, sessionID string, v store.View, after int64, limit int, maxBytes int64) ([]store.Entry, error)
	LastSeq(ctx context.Context, sessionID string) (int64, error)
}

// eventSender appends the events clients send (sessions.Service).
type eventSender interface {
	Send(ctx context.Context, id string, evs []ma.Event, rec sessions.Record) ([]ma.Event, error)
}

// previewFeed gives the previews of the events a session's turns are
// making (harness.Previews).
type previewFeed interface {
	Subscribe(sessionID string) (<-chan ma.Preview, func())
}

// eventsAPI serves a session's events: send, list and stream.
type eventsAPI struct {
	s        *Server // idempotency, budgets, tails, shutdown, stream keys
	st       eventStore
	sessions eventSender
	previews previewFeed // nil: streams get no previews
}

// eventRoutes registers the event endpoints.
func (s *Server) eventRoutes() {
	e := &eventsAPI{s: s, st: s.cfg.Store, sessions: s.cfg.Sessions}
	if s.cfg.Harness != nil {
		e.previews = s.cfg.Harness.Previews()
	}
	s.handle("POST /v1/sessions/{id}/events", s.cfg.MaxBody, s.bodyBudget(e.sendEvents))
	s.handle("GET /v1/sessions/{id}/events", smallBody, e.listEvents)
	s.handle("GET /v1/sessions/{id}/events/stream", smallBody, counted(&s.streams, e.streamEvents))
	s.threadRoutes(e)
}

// eventParam is a client event as sent.
type eventParam struct {
	Type            *string           `json:"type"`
	Content         []ma.ContentBlock `json:"content"`
	ToolUseID       string            `json:"tool_use_id"`
	CustomToolUseID string            `json:"custom_tool_use_id"`
	Result          string            `json:"result"`
	DenyMessage     *string           `json:"deny_message"`
	IsError         *bool             `json:"is_error"`
	SessionThreadID string            `json:"session_thread_id"`
	// user.define_outcome.
	Description   *string         `json:"description"`
	Rubric        json.RawMessage `json:"rubric"`
	MaxIterations *int64          `json:"max_iterations"`
}

// decodeEventParam validates one client event on its own (rules that need
// the session's state are checked later).
func decodeEventParam(field string, raw json.RawMessage) (ma.Event, error) {
	var p eventParam
	if err := decodeBytes(raw, &p); err != nil {
		return ma.Event{}, fieldPrefix(field+": ", err)
	}
	if p.Type == nil {
		return ma.Event{}, badRequest("%s.type: required", field)
	}
	ev := ma.Event{Type: *p.Type}
	if p.SessionThreadID != "" {
		if ev.Type != ma.EventUserInterrupt {
			return ev, badRequest("%s.session_thread_id: only a user.interrupt names a thread; the server routes %s itself", field, ev.Type)
		}
		ev.SessionThreadID = p.SessionThreadID
	}
	switch ev.Type {
	case ma.EventUserMessage:
		if len(p.Content) == 0 {
			return ev, badRequest("%s.content: at least one content block is required", field)
		}
		if err := validateContent(field+".content", p.Content, "text", "image", "document", ma.BlockRedacted); err != nil {
			return ev, err
		}
		ev.Content = p.Content
	case ma.EventSystemMessage:
		if len(p.Content) == 0 || len(p.Content) > 1000 {
			return ev, badRequest("%s.content: 1 to 1000 text blocks are required", field)
		}
		if err := validateContent(field+".content", p.Content, "text"); err != nil {
			return ev, err
		}
		ev.Content = p.Content
	case ma.EventUserInterrupt:
	case ma.EventUserToolConfirmation:
		if p.ToolUseID == "" {
			return ev, badRequest("%s.tool_use_id: required", field)
		}
		if p.Result != "allow" && p.Result != "deny" {
			return ev, badRequest("%s.result: must be allow or deny; got %q", field, p.Result)
		}
		if p.DenyMessage != nil {
			if p.Result != "deny" {
				return ev, badRequest("%s.deny_message: only allowed with result \"deny\"", field)
			}
			ev.DenyMessage = *p.DenyMessage
		}
		ev.ToolUseID, ev.Result = p.ToolUseID, p.Result
	case ma.EventUserCustomToolResult:
		if p.CustomToolUseID == "" {
			return ev, badRequest("%s.custom_tool_use_id: required", field)
		}
		if err := validateContent(field+".content", p.Content, "text", "image", "document", "search_result"); err != nil {
			return ev, err
		}
		ev.CustomToolUseID, ev.Content = p.CustomToolUseID, p.Content
		f := p.IsError != nil && *p.IsError
		ev.IsError = &f
	case ma.EventUserToolResult:
		if p.ToolUseID == "" {
			return ev, badRequest("%s.tool_use_id: required", field)
		}
		if err := validateContent(field+".content", p.Content, "text", "image", "document", "search_result"); err != nil {
			return ev, err
		}
		ev.ToolUseID, ev.Content = p.ToolUseID, p.Content
		f := p.IsError != nil && *p.IsError
		ev.IsError = &f
	case ma.EventUserDefineOutcome:
		if err := decodeDefineOutcome(field, p, &ev); err != nil {
			return ev, err
		}
	case "":
		return ev, badRequest("%s.type: required", field)
	default:
		return ev, badRequest("%s.type: %q is not an event a client can send", field, ev.Type)
	}
	return ev, nil
}

// workerEvents are the events an environment key or sessions token may
// send: the results of the tool uses its worker runs. What drives a
// session (user.message, user.interrupt, user.tool_confirmation,
// system.message) needs an API key.
var workerEvents = []string{ma.EventUserToolResult, ma.EventUserCustomToolResult}

// mayPost refuses, before anything is validated or appended, a send by an
// environment key or sessions token holding an event other than
// workerEvents. An event whose type cannot be read is left to the
// validation.
func (p Principal) mayPost(events []rawView) error {
	if p.EnvironmentID == "" && p.Grant == nil {
		return nil
	}
	for i, raw := range events {
		var ev struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &ev) == nil && ev.Type != "" && !slices.Contains(workerEvents, ev.Type) {
			return errf(http.StatusForbidden, ma.ErrPermission,
				"events[%d].type: an environment key or sessions token may send only %s events, the results of the tools its worker runs; %s needs an API key",
				i, strings.Join(workerEvents, " and "), ev.Type)
		}
	}
	return nil
}

type sendBody struct {
	Events []rawView `json:"events"` // slices of the request body
}

// sendEvents appends the events a client sends. Sent with an
// Idempotency-Key, the send is recorded with its events, and repeated
// with the key it answers them as they were appended.
func (e *eventsAPI) sendEvents(w http.ResponseWriter, r *http.Request) error {
	idem, err := e.s.idempotency(r)
	if err != nil {
		return err
	}
	var body sendBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := principal(r).mayPost(body.Events); err != nil {
		return err
	}
	if done, err := e.s.replayOutcome(w, r, idem); done || err != nil {
		return err
	}
	evs, err := e.sentEvents(r, body)
	if err != nil {
		return err
	}
	evs, err = e.sessions.Send(r.Context(), r.PathValue("id"), evs, idem.record(nil))
	var re *sessions.RejectedError
	if errors.As(err, &re) {
		if re.Conflict {
			return conflict("%s", re.Message)
		}
		return badRequest("%s", re.Message)
	}
	if err != nil {
		return e.s.keyRecorded(w, r, idem, err)
	}
	writeJSON(w, struct {
		Data []ma.Event `json:"data"`
	}{evs})
	return nil
}

// sentEvents decodes and checks the events of a send.
func (e *eventsAPI) sentEvents(r *http.Request, body sendBody) ([]ma.Event, error) {
	if len(body.Events) == 0 {
		return nil, badRequest("events: at least one event is required")
	}
	if len(body.Events) > maxEventsPerRequest {
		return nil, badRequest("events: at most %d events per request, got %d", maxEventsPerRequest, len(body.Events))
	}
	evs := make([]ma.Event, len(body.Events))
	systems := 0
	for i, raw := range body.Events {
		ev, err := decodeEventParam(fmt.Sprintf("events[%d]", i), json.RawMessage(raw))
		if err != nil {
			return nil, err
		}
		if err := checkFileSources(r.Context(), e.st, fmt.Sprintf("events[%d].content", i), ev.Content); err != nil {
			return nil, err
		}
		if err := resolveRubric(r.Context(), e.st, fmt.Sprintf("events[%d]", i), &ev); err != nil {
			return nil, err
		}
		if ev.Type == ma.EventSystemMessage {
			systems++
			if systems > 1 {
				return nil, badRequest("events[%d]: at most one system.message per request", i)
			}
			if i != len(body.Events)-1 {
				return nil, badRequest("events[%d]: a system.message must be the last event of the request", i)
			}
			if i == 0 || (evs[i-1].Type != ma.EventUserMessage && evs[i-1].Type != ma.EventUserCustomToolResult && evs[i-1].Type != ma.EventUserToolResult) {
				return nil, badRequest("events[%d]: a system.message must immediately follow a user.message or a tool result in the same request", i)
			}
		}
		evs[i] = ev
	}
	return evs, nil
}

// listEvents serves GET /v1/sessions/{id}/events: the session's stream
// (store.SessionView), paged.
func (e *eventsAPI) listEvents(w http.ResponseWriter, r *http.Request) error {
	return e.listView(w, r, store.SessionView())
}

// listView serves a page of one view of the session's log: the
// session's stream or a thread's.
func (e *eventsAPI) listView(w http.ResponseWriter, r *http.Request, v store.View) error {
	q := query{r}
	limit, err := q.limit(1000, 1000)
	if err != nil {
		return err
	}
	order, err := q.order("asc")
	if err != nil {
		return err
	}
	eq := store.EventQuery{Limit: limit, Desc: order == "desc", View: v}
	if eq.Types, err = q.enums("types", "event type", eventTypes); err != nil {
		return err
	}
	for _, b := range []struct {
		key string
		dst **time.Time
	}{{"created_at[gt]", &eq.GT}, {"created_at[gte]", &eq.GTE}, {"created_at[lt]", &eq.LT}, {"created_at[lte]", &eq.LTE}} {
		if *b.dst, err = q.time(b.key); err != nil {
			return err
		}
	}
	if page := q.str("page"); page != "" {
		c, err := decodeCursor(page, order)
		if err != nil {
			return err
		}
		if c.Prev {
			eq.Before = c.Pos
		} else {
			eq.After = c.Pos
		}
	}
	entries, release, err := e.listPage(r, eq)
	if err != nil {
		return err
	}
	defer release()
	// The page ends at its head, if it has one: the next page starts
	// there.
	data := slices.DeleteFunc(entries, store.Entry.Head)
	var next *string
	if len(data) > 0 && (len(data) == limit || len(data) < len(entries)) {
		next = cursor{Pos: data[len(data)-1].Seq, Order: order}.encode()
	}
	writeEventPage(w, data, next)
	return nil
}

// listPage reads a page of the events list within listPageBytes of event
// JSON: the store leaves the events past that as a head. An event larger
// than a page comes alone, read once the event budget has room for it
// (release gives the room back).
func (e *eventsAPI) listPage(r *http.Request, eq store.EventQuery) (entries []store.Entry, release func(), err error) {
	release = func() {}
	eq.Raw, eq.MaxBytes = true, listPageBytes
	for range 3 { // an event superseded meanwhile may leave another head
		if entries, err = e.st.ListEvents(r.Context(), r.PathValue("id"), eq); err != nil {
			release()
			return nil, nil, err
		}
		if len(entries) != 1 || !entries[0].Head() {
			return entries, release, nil
		}
		release()
		if release, err = e.s.admit(r, e.s.mem.events, entries[0].Size); err != nil {
			return nil, nil, err
		}
		eq.MaxBytes = entries[0].Size
	}
	release()
	return nil, nil, errf(http.StatusServiceUnavailable, ma.ErrOverloaded, "the events changed while they were read; retry")
}

// writeEventPage writes a page of the events list with the events' stored
// JSON as it is, with no copy of it: what json.Encoder would write for a
// ma.Page of json.RawMessage (the stored JSON is compact and HTML-escaped,
// as json.Marshal wrote it).
func writeEventPage(w http.ResponseWriter, data []store.Entry, next *string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"data":[`)
	for i, e := range data {
		if i > 0 {
			io.WriteString(w, ",")
		}
		w.Write(e.Raw)
	}
	tail, _ := json.Marshal(next)
	io.WriteString(w, `],"next_page":`)
	w.Write(tail)
	io.WriteString(w, "}\n")
}
