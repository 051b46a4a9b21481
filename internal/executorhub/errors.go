package executorhub

import "errors"

// Errors of the hub.
var (
	// ErrToolOutcomeUnknown means the executor was lost (lease expiry,
	// executor.close, session ended, or a restarted executor that no longer
	// reports the session) before a tool.result arrived. The tool may or may
	// not have run; the caller decides whether a retry is safe.
	ErrToolOutcomeUnknown = errors.New("executor: tool outcome unknown: executor lost before tool.result")
	// ErrAssignRejected is returned when session.assign answers
	// accepted=false.
	ErrAssignRejected = errors.New("executor: executor rejected session.assign")
	// ErrNoExecutor is returned by [Hub.Assign] when no registered executor
	// of the environment can take the session now; wait on
	// [Hub.Changed] and try again.
	ErrNoExecutor = errors.New("executor: no executor available for the session")
)
