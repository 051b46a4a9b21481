package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/reinsdev/reins/harness"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/store"
)

// maxEventsPerRequest bounds one send.
const maxEventsPerRequest = 100

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
	ev := ma.Event{Type: *p.Type, SessionThreadID: p.SessionThreadID}
	switch ev.Type {
	case ma.EventUserMessage:
		if len(p.Content) == 0 {
			return ev, badRequest("%s.content: at least one content block is required", field)
		}
		if err := validateContent(field+".content", p.Content, "text", "image", "document"); err != nil {
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
		return ev, badRequest("%s.type: outcomes (user.define_outcome) are not supported by this server yet", field)
	case "":
		return ev, badRequest("%s.type: required", field)
	default:
		return ev, badRequest("%s.type: %q is not an event a client can send", field, ev.Type)
	}
	return ev, nil
}

type sendBody struct {
	Events []json.RawMessage `json:"events"`
}

func (s *Server) sendEvents(w http.ResponseWriter, r *http.Request) error {
	var body sendBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if len(body.Events) == 0 {
		return badRequest("events: at least one event is required")
	}
	if len(body.Events) > maxEventsPerRequest {
		return badRequest("events: at most %d events per request, got %d", maxEventsPerRequest, len(body.Events))
	}
	evs := make([]ma.Event, len(body.Events))
	systems := 0
	for i, raw := range body.Events {
		ev, err := decodeEventParam(fmt.Sprintf("events[%d]", i), raw)
		if err != nil {
			return err
		}
		if ev.Type == ma.EventSystemMessage {
			systems++
			if systems > 1 {
				return badRequest("events[%d]: at most one system.message per request", i)
			}
			if i != len(body.Events)-1 {
				return badRequest("events[%d]: a system.message must be the last event of the request", i)
			}
			if i == 0 || (evs[i-1].Type != ma.EventUserMessage && evs[i-1].Type != ma.EventUserCustomToolResult && evs[i-1].Type != ma.EventUserToolResult) {
				return badRequest("events[%d]: a system.message must immediately follow a user.message or a tool result in the same request", i)
			}
		}
		evs[i] = ev
	}
	id := r.PathValue("id")
	// The session's waiting actions, to validate confirmations and results
	// (read only when the request needs them: plain messages skip it).
	var actions harness.Actions
	for _, ev := range evs {
		if ev.Type == ma.EventUserToolConfirmation || ev.Type == ma.EventUserCustomToolResult || ev.Type == ma.EventUserInterrupt || ev.Type == ma.EventUserToolResult || ev.Type == ma.EventSystemMessage {
			entries, err := s.cfg.Store.ListEvents(r.Context(), id, store.EventQuery{Limit: 1 << 30})
			if err != nil {
				return err
			}
			live := make([]ma.Event, len(entries))
			for i, e := range entries {
				live[i] = e.Event
			}
			client, err := s.cfg.Store.SessionWorkAcked(r.Context(), id)
			if err != nil {
				return err
			}
			actions = harness.PendingActions(live, client)
			break
		}
	}
	interrupt := false
	sess, err := s.cfg.Store.UpdateSession(r.Context(), id, func(tx store.Tx) error {
		sess := tx.Session()
		if sess.ArchivedAt != nil {
			return conflict("session %s is archived; it accepts no events", sess.ID)
		}
		if sess.Status == ma.StatusTerminated {
			return conflict("session %s is terminated; it accepts no events", sess.ID)
		}
		now := ma.Time(time.Now())
		for i := range evs {
			ev := &evs[i]
			f := fmt.Sprintf("events[%d]", i)
			switch ev.Type {
			case ma.EventUserToolConfirmation:
				if !actions.Confirm[ev.ToolUseID] {
					return badRequest("%s.tool_use_id: %s is not a tool use awaiting confirmation", f, ev.ToolUseID)
				}
				delete(actions.Confirm, ev.ToolUseID)
				ev.ProcessedAt = &now
			case ma.EventUserToolResult:
				if !actions.ToolResults[ev.ToolUseID] {
					return badRequest("%s.tool_use_id: %s is not a tool use awaiting a result from a self-hosted worker", f, ev.ToolUseID)
				}
				delete(actions.ToolResults, ev.ToolUseID)
				ev.ProcessedAt = &now
			case ma.EventUserCustomToolResult:
				if !actions.CustomResults[ev.CustomToolUseID] {
					return badRequest("%s.custom_tool_use_id: %s is not a custom tool use awaiting a result", f, ev.CustomToolUseID)
				}
				delete(actions.CustomResults, ev.CustomToolUseID)
				ev.ProcessedAt = &now
			case ma.EventSystemMessage:
				// While the session waits on requires_action, a system
				// message may only trail a tool result.
				waiting := actions.TurnActive && sess.Status != ma.StatusRunning
				if waiting && evs[i-1].Type == ma.EventUserMessage {
					return badRequest("%s: the session is waiting for tool results (requires_action); a system.message is accepted only after a tool result", f)
				}
			case ma.EventUserInterrupt:
				if sess.Status == ma.StatusIdle && !actions.TurnActive {
					ev.ProcessedAt = &now // no-op on an idle session
				} else {
					interrupt = true
				}
			}
			if err := tx.Append(ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.cfg.Bus.Publish(id)
	if interrupt {
		s.cfg.Harness.Interrupt(id)
	} else {
		s.cfg.Harness.Wake(id)
	}
	for _, ev := range evs {
		if ev.Type == ma.EventUserMessage || ev.Type == ma.EventSystemMessage {
			// New input for a dormant self-hosted session wakes a worker.
			if err := s.enqueueWork(r.Context(), &sess); err != nil {
				return err
			}
			break
		}
	}
	writeJSON(w, struct {
		Data []ma.Event `json:"data"`
	}{evs})
	return nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	limit, err := q.limit(1000, 1000)
	if err != nil {
		return err
	}
	order, err := q.order("asc")
	if err != nil {
		return err
	}
	eq := store.EventQuery{Limit: limit, Desc: order == "desc"}
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
	entries, err := s.cfg.Store.ListEvents(r.Context(), r.PathValue("id"), eq)
	if err != nil {
		return err
	}
	page := ma.Page[json.RawMessage]{Data: make([]json.RawMessage, len(entries))}
	for i, e := range entries {
		page.Data[i] = e.Raw
	}
	if len(entries) == limit {
		page.NextPage = cursor{Pos: entries[len(entries)-1].Seq, Order: order}.encode()
	}
	writeJSON(w, page)
	return nil
}
