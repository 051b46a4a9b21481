package managedagents

import (
	"encoding/json"
	"strings"
)

// ThreadPrefix is the prefix of session thread ids.
const ThreadPrefix = "sthr_"

// MaxThreads is how many threads a session may have that are not
// archived, its primary thread included.
const MaxThreads = 25

// SessionThread is an execution thread of a session (the API's
// BetaManagedAgentsSessionThread): the primary thread every session has
// (ParentThreadID nil, its id derived from the session's, see
// PrimaryThreadID) or a child thread a delegation started.
type SessionThread struct {
	ID             string       `json:"id"`
	Type           string       `json:"type"` // "session_thread"
	SessionID      string       `json:"session_id"`
	ParentThreadID *string      `json:"parent_thread_id"`
	Status         string       `json:"status"` // StatusRunning, StatusIdle, StatusRescheduling, StatusTerminated
	Agent          ThreadAgent  `json:"agent"`
	Stats          *ThreadStats `json:"stats"` // nil until the first status transition
	Usage          *ThreadUsage `json:"usage"` // nil until the first idle
	WorkflowRunID  *string      `json:"workflow_run_id"`
	CreatedAt      string       `json:"created_at"`
	UpdatedAt      string       `json:"updated_at"`
	ArchivedAt     *string      `json:"archived_at"`
}

// ThreadType is the type of a SessionThread.
const ThreadType = "session_thread"

// ThreadStats are a thread's timing figures.
type ThreadStats struct {
	ActiveSeconds   float64 `json:"active_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
	// StartupSeconds is 0 for child threads, which start at once.
	StartupSeconds float64 `json:"startup_seconds"`
}

// ThreadUsage is the token usage of a thread's model calls.
type ThreadUsage struct {
	InputTokens          int64            `json:"input_tokens"`
	OutputTokens         int64            `json:"output_tokens"`
	CacheReadInputTokens int64            `json:"cache_read_input_tokens"`
	CacheCreation        CacheCreation    `json:"cache_creation"`
	ActiveSeconds        float64          `json:"active_seconds"`
	ListCost             Raw              `json:"list_cost"` // null: reins prices nothing
	ServerToolUse        *ServerToolUsage `json:"server_tool_use"`
}

// Thread agent types.
const (
	ThreadAgentSaved   = "agent"   // a saved agent's snapshot
	ThreadAgentAdvisor = "advisor" // a second model the agent consults
	ThreadAgentInline  = "inline"  // an agent the model defined at spawn time
)

// ThreadAgent is the agent a thread runs: the snapshot of a saved agent
// at the thread's creation (Type "agent"), an advisor (Type "advisor":
// only Model.ID is written, as the string "model") or an inline agent
// (Type "inline": no ID or Version).
type ThreadAgent struct {
	Type              string      `json:"type"`
	ID                string      `json:"id,omitempty"`
	Name              string      `json:"name,omitempty"`
	Description       string      `json:"description,omitempty"`
	System            string      `json:"system,omitempty"`
	Model             ModelConfig `json:"model"`
	Tools             []Tool      `json:"tools,omitempty"`
	MCPServers        []MCPServer `json:"mcp_servers,omitempty"`
	Skills            []SkillRef  `json:"skills,omitempty"`
	ExecutionIdentity Raw         `json:"execution_identity,omitempty"`
	Version           int64       `json:"version,omitempty"`
}

// defaultExecutionIdentity is the execution identity of an agent that has
// none set.
const defaultExecutionIdentity = `{"type":"service_account"}`

// MarshalJSON writes the fields of the agent's own type, each present
// (lists as [], not null).
func (a ThreadAgent) MarshalJSON() ([]byte, error) {
	if a.Type == ThreadAgentAdvisor {
		return json.Marshal(struct {
			Type  string `json:"type"`
			Model string `json:"model"`
		}{a.Type, a.Model.ID})
	}
	type common struct {
		Type              string      `json:"type"`
		Name              string      `json:"name"`
		Description       string      `json:"description"`
		System            string      `json:"system"`
		Model             ModelConfig `json:"model"`
		Tools             []Tool      `json:"tools"`
		MCPServers        []MCPServer `json:"mcp_servers"`
		Skills            []SkillRef  `json:"skills"`
		ExecutionIdentity Raw         `json:"execution_identity"`
	}
	c := common{a.Type, a.Name, a.Description, a.System, a.Model, nonNil(a.Tools), nonNil(a.MCPServers), nonNil(a.Skills), a.ExecutionIdentity}
	if len(c.ExecutionIdentity) == 0 || string(c.ExecutionIdentity) == "null" {
		c.ExecutionIdentity = Raw(defaultExecutionIdentity)
	}
	if a.Type == ThreadAgentInline {
		return json.Marshal(c)
	}
	return json.Marshal(struct {
		ID string `json:"id"`
		common
		Version int64 `json:"version"`
	}{a.ID, c, a.Version})
}

// UnmarshalJSON reads any of the three forms; an advisor's model is a
// string, the others' a model object or a string.
func (a *ThreadAgent) UnmarshalJSON(b []byte) error {
	type plain ThreadAgent
	var v struct {
		plain
		Model json.RawMessage `json:"model"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = ThreadAgent(v.plain)
	a.Model = ModelConfig{}
	if len(v.Model) == 0 || string(v.Model) == "null" {
		return nil
	}
	if v.Model[0] == '"' {
		return json.Unmarshal(v.Model, &a.Model.ID)
	}
	return json.Unmarshal(v.Model, &a.Model)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// PrimaryThreadID is the id of a session's primary thread: "sthr_" and the
// session id's random part. It is derived, never stored, and never
// written on the primary thread's events (they carry no
// session_thread_id).
func PrimaryThreadID(sessionID string) string {
	_, suffix, _ := strings.Cut(sessionID, "_")
	return ThreadPrefix + suffix
}

// Event types of threads.
const (
	EventThreadCreated           = "session.thread_created"
	EventThreadStatusRunning     = "session.thread_status_running"
	EventThreadStatusIdle        = "session.thread_status_idle"
	EventThreadStatusRescheduled = "session.thread_status_rescheduled"
	EventThreadStatusTerminated  = "session.thread_status_terminated"
	EventThreadMessageSent       = "agent.thread_message_sent"
	EventThreadMessageReceived   = "agent.thread_message_received"
)

// StreamThread returns the thread whose own stream holds ev, an event of
// session sessionID: "" for the primary thread, else a child thread's id.
// That is the event's session_thread_id, except that the primary's id
// (which only a user.interrupt naming it carries) means the primary, and
// that session.thread_created, which names the new thread, belongs to the
// primary thread that made it.
func StreamThread(sessionID string, ev *Event) string {
	if ev.Type == EventThreadCreated || ev.SessionThreadID == PrimaryThreadID(sessionID) {
		return ""
	}
	return ev.SessionThreadID
}

// OnSessionStream is the one rule of what a session's own stream and
// events list show (GET /v1/sessions/{id}/events and …/stream, and every
// other reader of the session as a whole): every event of the primary
// thread (no session_thread_id, or the primary's id, which only a
// user.interrupt naming the primary carries), and of a child thread's
// events the ones cross-posted to the session: its creation and status
// changes, its tool uses that wait for the client (a permission to
// confirm, a custom tool to run) and what the client sent it (tool
// confirmations and results routed to it, an interrupt naming it).
//
// A thread's own stream (…/threads/{tid}/events and …/stream) shows the
// events whose StreamThread is the thread.
func OnSessionStream(ev *Event) bool {
	if ev.SessionThreadID == "" || strings.HasPrefix(ev.Type, "user.") {
		return true
	}
	switch ev.Type {
	case EventThreadCreated, EventThreadStatusRunning, EventThreadStatusIdle,
		EventThreadStatusRescheduled, EventThreadStatusTerminated, EventAgentCustomToolUse:
		return true
	case EventAgentToolUse, EventAgentMCPToolUse:
		return ev.EvaluatedPermission == "ask"
	}
	return false
}

// jsonNull is the JSON null of the nullable fields thread events require.
var jsonNull = Raw("null")

// ThreadCreated is the session.thread_created event of a child thread:
// its SessionThreadID names the new thread, yet it is an event of the
// primary thread (see StreamThread). workflowRunID is nil for a thread no
// workflow run created.
func ThreadCreated(threadID, agentName string, workflowRunID *string) Event {
	ev := Event{Type: EventThreadCreated, SessionThreadID: threadID, AgentName: agentName, WorkflowRunID: jsonNull}
	if workflowRunID != nil {
		ev.WorkflowRunID, _ = json.Marshal(*workflowRunID)
	}
	return ev
}

// ThreadStatus is a session.thread_status_* event (typ, one of the
// EventThreadStatus* types) of a child thread. For
// session.thread_status_idle, reason is the stop reason (its
// stop_details is null).
func ThreadStatus(typ, threadID, agentName string, reason *StopReason) Event {
	ev := Event{Type: typ, SessionThreadID: threadID, AgentName: agentName}
	if typ == EventThreadStatusIdle {
		ev.StopReason, ev.StopDetails = reason, jsonNull
	}
	return ev
}
