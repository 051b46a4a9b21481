package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// cursor is the opaque page token: a position, the list order it belongs
// to, and its direction.
type cursor struct {
	Pos   int64  `json:"p"`
	Order string `json:"o"`
	Prev  bool   `json:"b,omitempty"`
}

func (c cursor) encode() *string {
	b, _ := json.Marshal(c)
	s := "page_" + base64.RawURLEncoding.EncodeToString(b)
	return &s
}

func decodeCursor(s, order string) (cursor, error) {
	var c cursor
	raw, ok := strings.CutPrefix(s, "page_")
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if !ok || err != nil || json.Unmarshal(b, &c) != nil || c.Pos <= 0 {
		return c, badRequest("page: invalid page cursor")
	}
	if c.Order != order {
		return c, badRequest("page: this cursor belongs to order=%s, not order=%s", c.Order, order)
	}
	return c, nil
}

// query wraps URL query access with the SDKs' conventions: bracketed
// arrays, repeated keys and comma lists.
type query struct{ r *http.Request }

func (q query) str(key string) string { return q.r.URL.Query().Get(key) }

func (q query) list(key string) []string {
	v := q.r.URL.Query()
	var out []string
	for _, k := range []string{key + "[]", key} {
		for _, s := range v[k] {
			for _, part := range strings.Split(s, ",") {
				if part = strings.TrimSpace(part); part != "" {
					out = append(out, part)
				}
			}
		}
	}
	return out
}

func (q query) limit(def, max int) (int, error) {
	s := q.str("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("limit: must be an integer from 1 to %d, got %q", max, s)
	}
	return n, nil
}

// boolean reads the boolean parameter key, false when absent. It takes
// the spellings strconv.ParseBool does; anything else is refused naming the
// canonical true and false.
func (q query) boolean(key string) (bool, error) {
	s := q.str(key)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, unknownValue(key, "value", s, booleanValues)
	}
	return b, nil
}

// order reads the list order parameter, def when absent.
func (q query) order(def string) (string, error) {
	return q.enum("order", "order", def, listOrders)
}

func (q query) time(key string) (*time.Time, error) {
	s := q.str(key)
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, badRequest("%s: must be an RFC 3339 timestamp, got %q", key, s)
	}
	return &t, nil
}

func (q query) int64(key string) (int64, error) {
	s := q.str(key)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, badRequest("%s: must be a positive integer, got %q", key, s)
	}
	return n, nil
}

// Accepted values of the enumerated query parameters. Each table is read
// only; the API reference and the official SDKs' enums are the source.
var (
	booleanValues = []string{"true", "false"}
	listOrders    = []string{"asc", "desc"}
	// sessionStatuses are the values of GET /v1/sessions statuses[].
	sessionStatuses = []string{ma.StatusIdle, ma.StatusRunning, ma.StatusRescheduling, ma.StatusTerminated}
	// stopReasons are the values of GET /v1/sessions stop_reasons[] (a
	// reins extension): the idle stop reasons.
	stopReasons = []string{ma.StopEndTurn, ma.StopRequiresAction, ma.StopRetriesExhausted, ma.StopBudgetReached}
	// deltaTypes are the values of the stream's event_deltas[].
	deltaTypes = []string{ma.EventAgentMessage, ma.EventAgentThinking}
	// eventTypes are the values of the events list's types[]: every event
	// type the API defines, including ones this server never writes (a
	// filter on those is valid and matches nothing).
	eventTypes = []string{
		"agent.custom_tool_use", "agent.mcp_tool_result", "agent.mcp_tool_use",
		"agent.message", "agent.thinking", "agent.thread_context_compacted",
		"agent.thread_message_received", "agent.thread_message_sent",
		"agent.tool_result", "agent.tool_use",
		"session.deleted", "session.error", "session.status_idle",
		"session.status_rescheduled", "session.status_running",
		"session.status_terminated", "session.thread_created",
		"session.thread_status_idle", "session.thread_status_rescheduled",
		"session.thread_status_running", "session.thread_status_terminated",
		"session.updated", "session.usage",
		"span.model_request_end", "span.model_request_start",
		"span.outcome_evaluation_end", "span.outcome_evaluation_ongoing",
		"span.outcome_evaluation_start",
		"system.message",
		"user.custom_tool_result", "user.define_outcome", "user.interrupt",
		"user.message", "user.tool_confirmation", "user.tool_result",
		"workflow_run.created", "workflow_run.error", "workflow_run.phase_ended",
		"workflow_run.phase_started", "workflow_run.status_ended",
		"workflow_run.status_idle", "workflow_run.status_running",
	}
)

// enum reads the single-valued enumerated parameter key: def when absent,
// else one of accepted. noun names what a value is ("order", "status").
func (q query) enum(key, noun, def string, accepted []string) (string, error) {
	s := q.str(key)
	if s == "" {
		return def, nil
	}
	if !slices.Contains(accepted, s) {
		return "", unknownValue(key, noun, s, accepted)
	}
	return s, nil
}

// enums reads the enumerated array parameter key (key[]=a&key[]=b, repeated
// keys, comma lists) and refuses the first value not in accepted. Errors
// name the parameter as key[], the spelling the SDKs send.
func (q query) enums(key, noun string, accepted []string) ([]string, error) {
	vs := q.list(key)
	for _, v := range vs {
		if !slices.Contains(accepted, v) {
			return nil, unknownValue(key+"[]", noun, v, accepted)
		}
	}
	return vs, nil
}

// unknownValue is the one refusal of an enumerated query value: a 400
// invalid_request_error naming the parameter, the value and what the
// parameter accepts.
func unknownValue(param, noun, v string, accepted []string) error {
	return badRequest("%s: unknown %s %q; expected one of %s", param, noun, v, strings.Join(accepted, ", "))
}
