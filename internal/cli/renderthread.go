package cli

import (
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// threadEvent renders the events of a multi-agent session's threads as
// the session's stream shows them: a child thread's creation and status
// changes, and the messages the primary thread's agent exchanges with the
// others. It remembers each thread's agent name, for the labels of the
// child's events cross-posted to the session (see threadLabel).
func (r *renderer) threadEvent(ev ma.Event) string {
	if ev.SessionThreadID != "" && ev.AgentName != "" {
		r.threads[ev.SessionThreadID] = ev.AgentName
	}
	name := r.threadName(ev.SessionThreadID, ev.AgentName)
	switch ev.Type {
	case ma.EventThreadCreated:
		return r.line(styleBold, "⑂ thread "+name+" started ("+ev.SessionThreadID+")")
	case ma.EventThreadStatusRunning:
		return r.line(styleDim, "["+name+"] running")
	case ma.EventThreadStatusIdle:
		s := "[" + name + "] idle"
		if ev.StopReason != nil {
			s += " (" + strings.ReplaceAll(ev.StopReason.Type, "_", " ") + ")"
		}
		return r.line(styleDim, s)
	case ma.EventThreadStatusRescheduled:
		return r.line(styleYellow, "["+name+"] being rescheduled; it resumes by itself")
	case ma.EventThreadStatusTerminated:
		return r.line(styleRed, "["+name+"] terminated")
	case ma.EventThreadMessageSent:
		return r.line(styleCyan, "⇢ to "+r.threadName(ev.ToSessionThreadID, ev.ToAgentName)+": "+oneLine(contentText(ev.Content), 300))
	case ma.EventThreadMessageReceived:
		return r.line(styleCyan, "⇠ from "+r.threadName(ev.FromSessionThreadID, ev.FromAgentName)+": "+oneLine(contentText(ev.Content), 300))
	}
	return ""
}

// threadName names a thread for a person: its agent's name as the event
// gives it or as seen before, "primary" for the primary thread (the
// thread messages leave the name out for it), else the thread's id.
func (r *renderer) threadName(threadID, agentName string) string {
	switch {
	case agentName != "":
		return agentName
	case threadID == "":
		return "primary"
	case r.threads[threadID] != "":
		return r.threads[threadID]
	}
	return threadID
}

// isThreadEvent reports whether typ is one of threadEvent's.
func isThreadEvent(typ string) bool {
	switch typ {
	case ma.EventThreadCreated, ma.EventThreadStatusRunning, ma.EventThreadStatusIdle, ma.EventThreadStatusRescheduled,
		ma.EventThreadStatusTerminated, ma.EventThreadMessageSent, ma.EventThreadMessageReceived:
		return true
	}
	return false
}

// threadLabel is the prefix of the lines of an event a child thread
// cross-posted to the session (a tool call waiting on the client, what
// the client sent it): "[researcher] ". The primary thread's events carry
// no thread and get none.
func (r *renderer) threadLabel(ev ma.Event) string {
	if ev.SessionThreadID == "" || isThreadEvent(ev.Type) {
		return ""
	}
	name := r.threads[ev.SessionThreadID]
	if name == "" {
		if strings.HasPrefix(ev.Type, "user.") {
			// A user event naming a thread not seen (the primary's, on
			// an interrupt) says nothing more with a label.
			return ""
		}
		name = ev.SessionThreadID
	}
	return "[" + name + "] "
}

// inThread names, for a prompt or a wait, the child thread of a tool
// call cross-posted to the session: " in thread researcher" ("" for the
// primary thread's calls).
func (r *renderer) inThread(ev ma.Event) string {
	if ev.SessionThreadID == "" {
		return ""
	}
	return " in thread " + r.threadName(ev.SessionThreadID, "")
}
