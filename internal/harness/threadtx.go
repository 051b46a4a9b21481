package harness

import (
	"slices"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// threadTx is a transaction of one thread of a multi-agent session. What
// reads the queue and the running marks through it sees its thread's
// only. For a child thread, what it appends is tagged with the thread's
// id, the session status events it appends are the thread's status
// events, and its Session is the session row as the thread sees it (the
// thread's status; the usage added to it goes to the session's and the
// thread's totals).
type threadTx struct {
	store.Tx
	sessionID string
	tid       string            // "" for the primary thread
	row       *ma.SessionThread // a child's row; nil for the primary
	shadow    *ma.Session       // a child's session row
	base      ma.SessionUsage   // the shadow's usage as read
	dirty     bool              // row changed
}

// bind makes tx a transaction of the child thread th. It fails with
// errThreadMoved when the thread's row is not as th's runner read it.
func (tx *threadTx) bind(th *thread) error {
	row, err := tx.Tx.Thread(th.id)
	if err != nil {
		return err
	}
	if row.ArchivedAt != nil || row.Status != th.status {
		return errThreadMoved
	}
	s := *tx.Tx.Session()
	s.Status, s.StopReason = row.Status, nil
	tx.tid, tx.row, tx.shadow, tx.base = th.id, &row, &s, s.Usage
	return nil
}

// Session implements store.Tx.
func (tx *threadTx) Session() *ma.Session {
	if tx.shadow != nil {
		return tx.shadow
	}
	return tx.Tx.Session()
}

// Append implements store.Tx.
func (tx *threadTx) Append(evs ...*ma.Event) error {
	if tx.row != nil {
		for _, ev := range evs {
			tx.tag(ev)
		}
	}
	return tx.Tx.Append(evs...)
}

// tag makes ev, appended by a child thread, the thread's.
func (tx *threadTx) tag(ev *ma.Event) {
	if ev.SessionThreadID == "" {
		ev.SessionThreadID = tx.tid
	}
	status := ""
	switch ev.Type {
	case ma.EventStatusRunning:
		ev.Type, status = ma.EventThreadStatusRunning, ma.StatusRunning
	case ma.EventStatusIdle:
		ev.Type, status = ma.EventThreadStatusIdle, ma.StatusIdle
		if ev.StopDetails == nil {
			ev.StopDetails = ma.Raw("null")
		}
	case ma.EventStatusRescheduled:
		ev.Type, status = ma.EventThreadStatusRescheduled, ma.StatusRescheduling
	case ma.EventStatusTerminated:
		ev.Type, status = ma.EventThreadStatusTerminated, ma.StatusTerminated
	default:
		return
	}
	ev.AgentName = threadAgentName(tx.row.Agent)
	tx.row.Status, tx.dirty = status, true
	if tx.row.Stats == nil {
		tx.row.Stats = &ma.ThreadStats{}
	}
}

// Pending implements store.Tx: the thread's queued events.
func (tx *threadTx) Pending() ([]ma.Event, error) {
	all, err := tx.Tx.Pending()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(ev ma.Event) bool { return ma.StreamThread(tx.sessionID, &ev) != tx.tid }), nil
}

// ToolsRunning implements store.Tx: the marks of the thread's tool uses.
func (tx *threadTx) ToolsRunning() ([]string, error) {
	marked, err := tx.Tx.ToolsRunning()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range marked {
		ev, err := tx.Tx.Event(id)
		if err != nil {
			continue // not a thread's tool use: left as it is
		}
		if ma.StreamThread(tx.sessionID, &ev) == tx.tid {
			out = append(out, id)
		}
	}
	return out, nil
}

// UnmarkToolRunning implements store.Tx: "" removes the thread's marks.
func (tx *threadTx) UnmarkToolRunning(toolUseID string) error {
	if toolUseID != "" {
		return tx.Tx.UnmarkToolRunning(toolUseID)
	}
	marked, err := tx.ToolsRunning()
	if err != nil {
		return err
	}
	for _, id := range marked {
		if err := tx.Tx.UnmarkToolRunning(id); err != nil {
			return err
		}
	}
	return nil
}

// flush writes what a child's transaction changed of its row and of the
// session's usage.
func (tx *threadTx) flush() error {
	if tx.row == nil {
		return nil
	}
	d := tx.shadow.Usage
	if d.InputTokens != tx.base.InputTokens || d.OutputTokens != tx.base.OutputTokens ||
		d.CacheReadInputTokens != tx.base.CacheReadInputTokens || d.CacheCreation != tx.base.CacheCreation {
		in, out := d.InputTokens-tx.base.InputTokens, d.OutputTokens-tx.base.OutputTokens
		read := d.CacheReadInputTokens - tx.base.CacheReadInputTokens
		c5 := d.CacheCreation.Ephemeral5mInputTokens - tx.base.CacheCreation.Ephemeral5mInputTokens
		s := tx.Tx.Session()
		s.Usage.InputTokens += in
		s.Usage.OutputTokens += out
		s.Usage.CacheReadInputTokens += read
		s.Usage.CacheCreation.Ephemeral5mInputTokens += c5
		s.UpdatedAt = tx.shadow.UpdatedAt
		if tx.row.Usage == nil {
			tx.row.Usage = &ma.ThreadUsage{ListCost: ma.Raw("null")}
		}
		tx.row.Usage.InputTokens += in
		tx.row.Usage.OutputTokens += out
		tx.row.Usage.CacheReadInputTokens += read
		tx.row.Usage.CacheCreation.Ephemeral5mInputTokens += c5
		tx.dirty = true
	}
	// The meter is the session's (shared with the shadow): the figures
	// reported from it, refreshed on the shadow, are the session's too.
	s := tx.Tx.Session()
	s.Usage.ListCost, s.Usage.ActiveSeconds = d.ListCost, d.ActiveSeconds
	if d.ServerToolUse != nil {
		s.Usage.ServerToolUse = d.ServerToolUse
	}
	if !tx.dirty {
		return nil
	}
	tx.row.UpdatedAt = ""
	return tx.Tx.PutThread(tx.row)
}

// threadAgentName is the agent name thread events carry.
func threadAgentName(a ma.ThreadAgent) string {
	if a.Type == ma.ThreadAgentAdvisor {
		return "advisor"
	}
	return a.Name
}
