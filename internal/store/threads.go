package store

import ma "github.com/reinsdev/reins/managedagents"

// View selects the part of a session's log one reader sees: the whole log
// (the zero View, what the runner and the internal readers read), the
// session's stream (SessionView: ma.OnSessionStream) or one thread's
// (ThreadView: ma.StreamThread). The store keeps, for each entry, the
// thread and whether it is on the session's stream, computed once by those
// two functions when it is appended, so that a view is read through an
// index instead of filtering the whole log.
type View struct {
	kind   viewKind
	thread string // the thread of a thread view, "" for the primary
}

type viewKind uint8

const (
	viewLog viewKind = iota
	viewSession
	viewThread
)

// SessionView is the view of the session's stream and events list.
func SessionView() View { return View{kind: viewSession} }

// ThreadView is the view of one thread's stream and events list:
// threadID is a thread of session sessionID, its primary thread's id
// (ma.PrimaryThreadID) or a child's.
func ThreadView(sessionID, threadID string) View {
	if threadID == ma.PrimaryThreadID(sessionID) {
		threadID = ""
	}
	return View{kind: viewThread, thread: threadID}
}

// IsSession reports whether v is SessionView().
func (v View) IsSession() bool { return v.kind == viewSession }

// Thread returns the thread of a thread view ("" for the primary) and
// whether v is one.
func (v View) Thread() (string, bool) { return v.thread, v.kind == viewThread }

// Includes reports whether the entry e is in the view.
func (v View) Includes(e Entry) bool {
	switch v.kind {
	case viewSession:
		return e.OnSession
	case viewThread:
		return e.Thread == v.thread
	}
	return true
}

// ThreadQuery pages through a session's child threads in creation order
// (After and Limit of ListQuery; Before and Desc are not used).
type ThreadQuery struct {
	ListQuery
	// Statuses keeps the threads in one of these statuses.
	Statuses []string
}

// ThreadsLeft returns how many more threads a session whose child threads
// are children may start: ma.MaxThreads counts the primary thread and
// every child thread that is not archived. It is never negative.
func ThreadsLeft(children []ma.SessionThread) int {
	n := ma.MaxThreads - 1
	for _, th := range children {
		if th.ArchivedAt == nil {
			n--
		}
	}
	return max(n, 0)
}
