package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/reinsdev/reins/internal/agents"
	"github.com/reinsdev/reins/internal/awaiting"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// The delegation tools a coordinator's model gets (the primary thread of
// a session whose agent has multiagent). Each runs in one transaction of
// the session: what it starts and its result are logged together.
const (
	// ToolSpawnAgent starts a child thread running a roster agent (or an
	// inline one) on a task; it returns at once with the thread's id.
	ToolSpawnAgent = "spawn_agent"
	// ToolMessageThread sends a message to a child thread.
	ToolMessageThread = "message_thread"
	// ToolListAgents lists the roster, the advisor and the threads.
	ToolListAgents = "list_agents"
	// ToolConsultAdvisor asks the advisor a question.
	ToolConsultAdvisor = "consult_advisor"
)

// delegationNote ends every delegation tool's description.
const delegationNote = " A thread's answer arrives as a message (\"" + ThreadMessagePrefix + "…\") when it ends its turn; " +
	"end your turn to wait for the answers of the threads still running."

// delegationTools returns the delegation tools a coordinator with cfg is
// offered.
func delegationTools(cfg *agents.Multiagent) []model.Tool {
	var out []model.Tool
	if cfg.SubagentsEnabled() {
		agentSchema := `{"type":"string","description":"The name (or id) of an agent of the roster (see list_agents)."}`
		if cfg.InlineAgents() {
			agentSchema = `{"description":"The name (or id) of an agent of the roster (see list_agents), or an agent you define: {name, system, model?, description?}.",` +
				`"anyOf":[{"type":"string"},{"type":"object","properties":{"name":{"type":"string"},"system":{"type":"string"},` +
				`"model":{"type":"string"},"description":{"type":"string"}},"required":["name","system"]}]}`
		}
		out = append(out,
			model.Tool{Name: ToolSpawnAgent, Description: "Start a new thread in which an agent works on a task, in parallel with you and the other threads; it shares your sandbox and files. Returns the thread's id at once." + delegationNote,
				InputSchema: json.RawMessage(`{"type":"object","properties":{"agent":` + agentSchema + `,"task":{"type":"string","description":"Everything the agent needs to know to do the task: it sees nothing else of this conversation."}},"required":["agent","task"]}`)},
			model.Tool{Name: ToolMessageThread, Description: "Send a message to a thread you started (for example a follow-up task); an idle thread starts a new turn with it." + delegationNote,
				InputSchema: json.RawMessage(`{"type":"object","properties":{"thread_id":{"type":"string"},"content":{"type":"string"}},"required":["thread_id","content"]}`)})
	}
	out = append(out, model.Tool{Name: ToolListAgents, Description: "List the agents you may start threads of, the advisor if you have one, and your threads with their status.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)})
	if _, ok := cfg.AdvisorModel(); ok {
		out = append(out, model.Tool{Name: ToolConsultAdvisor, Description: "Ask your advisor, a second model, a question; it sees only the question." + delegationNote,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`)})
	}
	return out
}

// planDelegation adds the delegation tools to the plan of a coordinator's
// model call (a tool of the agent with the same name keeps it).
func (r *runner) planDelegation(plan *toolPlan) {
	if r.kids == nil || r.th != nil {
		return
	}
	for _, t := range delegationTools(r.kids.cfg) {
		if plan.builtin[t.Name] != "" || plan.custom[t.Name] {
			continue
		}
		plan.offered = append(plan.offered, t)
		plan.builtin[t.Name] = ma.PolicyAlwaysAllow
	}
}

// isDelegation reports whether u is a call of a delegation tool by the
// coordinator's model.
func (r *runner) isDelegation(u awaiting.Use) bool {
	if r.kids == nil || r.th != nil || u.Event.Type != ma.EventAgentToolUse {
		return false
	}
	switch u.Event.Name {
	case ToolSpawnAgent, ToolMessageThread, ToolListAgents, ToolConsultAdvisor:
		return !r.hasOwnTool(u.Event.Name)
	}
	return false
}

// hasOwnTool reports whether the session's agent has a tool of that name.
func (r *runner) hasOwnTool(name string) bool {
	p := planTools(&r.sess.Agent)
	return p.builtin[name] != "" || p.custom[name]
}

// delegate runs a delegation tool call and records its result, in one
// transaction.
func (r *runner) delegate(ctx context.Context, u awaiting.Use) error {
	return r.update(ctx, func(tx store.Tx) error {
		text, err := r.delegation(tx, u.Event)
		isErr := err != nil
		if err != nil {
			if _, ok := err.(toolError); !ok {
				return err
			}
			text = err.Error()
		}
		now := r.h.now()
		return tx.Append(&ma.Event{Type: ma.EventAgentToolResult, ToolUseID: u.Event.ID, IsError: &isErr, ProcessedAt: &now,
			Content: []ma.ContentBlock{{Type: "text", Text: text}}})
	})
}

// toolError is a delegation call the tool refuses: its text is the
// tool's error result.
type toolError string

func (e toolError) Error() string { return string(e) }

func toolErrorf(format string, a ...any) error { return toolError(fmt.Sprintf(format, a...)) }

// delegation carries out a delegation call in tx and returns its result.
func (r *runner) delegation(tx store.Tx, ev ma.Event) (string, error) {
	var in struct {
		Agent    json.RawMessage `json:"agent"`
		Task     string          `json:"task"`
		ThreadID string          `json:"thread_id"`
		Content  string          `json:"content"`
		Question string          `json:"question"`
	}
	if err := json.Unmarshal(ev.Input, &in); err != nil {
		return "", toolErrorf("The input of %s is not valid: %v", ev.Name, err)
	}
	switch ev.Name {
	case ToolSpawnAgent:
		a, err := r.rosterAgent(in.Agent)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(in.Task) == "" {
			return "", toolErrorf("spawn_agent: task is required")
		}
		return r.spawn(tx, a, in.Task)
	case ToolMessageThread:
		return r.messageThread(tx, in.ThreadID, in.Content)
	case ToolConsultAdvisor:
		return r.consultAdvisor(tx, in.Question)
	default:
		return r.listAgents(tx)
	}
}

// rosterAgent resolves spawn_agent's agent: a roster entry's name or id,
// or an inline definition.
func (r *runner) rosterAgent(raw json.RawMessage) (ma.ThreadAgent, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		for _, e := range r.kids.cfg.Delegates() {
			if d := e.Definition; d != nil && (d.Name == name || d.ID == name) {
				return *d, nil
			}
		}
		return ma.ThreadAgent{}, toolErrorf("spawn_agent: no agent of the roster is named %q (see list_agents)", name)
	}
	if !r.kids.cfg.InlineAgents() {
		return ma.ThreadAgent{}, toolErrorf("spawn_agent: agent must be the name of an agent of the roster (inline agents are disabled)")
	}
	var def struct {
		Name, System, Model, Description string
	}
	if err := json.Unmarshal(raw, &def); err != nil || def.Name == "" || def.System == "" {
		return ma.ThreadAgent{}, toolErrorf("spawn_agent: an inline agent needs a name and a system prompt")
	}
	a := ma.ThreadAgent{Type: ma.ThreadAgentInline, Name: def.Name, Description: def.Description, System: def.System, Model: r.sess.Agent.Model}
	if def.Model != "" {
		a.Model = ma.ModelConfig{ID: def.Model}
	}
	for _, t := range r.sess.Agent.Tools {
		if t.Type == ma.ToolTypeAgentToolset {
			a.Tools = append(a.Tools, t)
		}
	}
	return a, nil
}

// spawn starts a child thread of agent a on task, in tx.
func (r *runner) spawn(tx store.Tx, a ma.ThreadAgent, task string) (string, error) {
	rows, err := tx.Threads()
	if err != nil {
		return "", err
	}
	if store.ThreadsLeft(rows) == 0 {
		return "", toolErrorf("A session has at most %d threads that are not archived (this one included); wait for a thread to finish.", ma.MaxThreads)
	}
	primary := ma.PrimaryThreadID(r.id)
	row := &ma.SessionThread{ID: ids.New(ma.ThreadPrefix), ParentThreadID: &primary, Status: ma.StatusIdle, Agent: a}
	created := ma.ThreadCreated(row.ID, threadAgentName(a), nil)
	now := r.h.now()
	created.ProcessedAt = &now
	if err := tx.Append(&created); err != nil {
		return "", err
	}
	if err := r.send(tx, row, task, true); err != nil {
		return "", err
	}
	return jsonText(map[string]any{"thread_id": row.ID, "agent_name": threadAgentName(a), "status": row.Status}), nil
}

// send sends content from the primary thread to the child thread row, in
// tx; an idle child (start: a new one) starts a turn with it.
func (r *runner) send(tx store.Tx, row *ma.SessionThread, content string, start bool) error {
	now := r.h.now()
	name := threadAgentName(row.Agent)
	body := []ma.ContentBlock{{Type: "text", Text: content}}
	if err := tx.Append(
		&ma.Event{Type: ma.EventThreadMessageSent, ProcessedAt: &now, ToSessionThreadID: row.ID, ToAgentName: name, Content: body},
		&ma.Event{Type: ma.EventThreadMessageReceived, ProcessedAt: &now, SessionThreadID: row.ID, FromSessionThreadID: ma.PrimaryThreadID(r.id), Content: body}); err != nil {
		return err
	}
	if c := r.kids.byID[row.ID]; !start && (row.Status != ma.StatusIdle || c == nil || c.turnActive()) {
		return nil // read when its turn can take it
	}
	st := ma.ThreadStatus(ma.EventThreadStatusRunning, row.ID, name, nil)
	st.ProcessedAt = &now
	if err := tx.Append(&st); err != nil {
		return err
	}
	row.Status, row.UpdatedAt = ma.StatusRunning, ""
	if row.Stats == nil {
		row.Stats = &ma.ThreadStats{}
	}
	return tx.PutThread(row)
}

// messageThread sends content to a child thread, in tx.
func (r *runner) messageThread(tx store.Tx, id, content string) (string, error) {
	if strings.TrimSpace(content) == "" {
		return "", toolErrorf("message_thread: content is required")
	}
	row, err := tx.Thread(id)
	if err != nil {
		return "", toolErrorf("message_thread: no thread %q in this session (see list_agents)", id)
	}
	if row.ArchivedAt != nil || row.Status == ma.StatusTerminated {
		return "", toolErrorf("message_thread: thread %s is %s; it takes no messages", id, map[bool]string{true: "archived", false: "terminated"}[row.ArchivedAt != nil])
	}
	if err := r.send(tx, &row, content, false); err != nil {
		return "", err
	}
	return jsonText(map[string]any{"thread_id": row.ID, "status": row.Status}), nil
}

// consultAdvisor asks the advisor question, in tx: a message to the
// session's advisor thread, started at the first question.
func (r *runner) consultAdvisor(tx store.Tx, question string) (string, error) {
	modelID, ok := r.kids.cfg.AdvisorModel()
	if !ok {
		return "", toolErrorf("consult_advisor: this agent has no advisor")
	}
	if strings.TrimSpace(question) == "" {
		return "", toolErrorf("consult_advisor: question is required")
	}
	rows, err := tx.Threads()
	if err != nil {
		return "", err
	}
	for _, row := range rows {
		if row.Agent.Type == ma.ThreadAgentAdvisor && row.ArchivedAt == nil && row.Status != ma.StatusTerminated {
			return r.messageThread(tx, row.ID, question)
		}
	}
	return r.spawn(tx, ma.ThreadAgent{Type: ma.ThreadAgentAdvisor, Model: ma.ModelConfig{ID: modelID}}, question)
}

// listAgents describes the roster, the advisor and the threads.
func (r *runner) listAgents(tx store.Tx) (string, error) {
	type agentInfo struct {
		Name        string `json:"name"`
		ID          string `json:"id"`
		Description string `json:"description"`
		Model       string `json:"model"`
	}
	type threadInfo struct {
		ThreadID  string `json:"thread_id"`
		AgentName string `json:"agent_name"`
		Status    string `json:"status"`
	}
	out := struct {
		Agents       []agentInfo  `json:"agents"`
		InlineAgents bool         `json:"inline_agents"`
		Advisor      *string      `json:"advisor_model"`
		Threads      []threadInfo `json:"threads"`
		ThreadsLeft  int          `json:"threads_left"`
	}{Agents: []agentInfo{}, InlineAgents: r.kids.cfg.InlineAgents(), Threads: []threadInfo{}}
	for _, e := range r.kids.cfg.Delegates() {
		if d := e.Definition; d != nil {
			out.Agents = append(out.Agents, agentInfo{d.Name, d.ID, d.Description, d.Model.ID})
		}
	}
	if m, ok := r.kids.cfg.AdvisorModel(); ok {
		out.Advisor = &m
	}
	rows, err := tx.Threads()
	if err != nil {
		return "", err
	}
	for _, row := range rows {
		if row.ArchivedAt == nil {
			out.Threads = append(out.Threads, threadInfo{row.ID, threadAgentName(row.Agent), row.Status})
		}
	}
	out.ThreadsLeft = store.ThreadsLeft(rows)
	return jsonText(out), nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
