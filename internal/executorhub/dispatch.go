package executorhub

import (
	"context"
	"errors"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
	"github.com/reinsdev/reins/tools/toolset"
)

// OutcomeUnknownText is what the model reads when a tool call ended with
// [ErrToolOutcomeUnknown].
const OutcomeUnknownText = "The executor running this tool was lost before it reported a result (lease expired, executor closed or restarted, or the session ended). " + toolset.MayHaveRunText

// RunTool runs a tool call of a session through the session's current
// lease, placing the session first (and waiting, like [Hub.WaitAssign],
// while no executor can take it) when it has no lease. It is the whole
// tool path of a harness:
//
//   - a tool that ran, including one that failed, is a result;
//   - when the executor was lost mid-call the result is an error result
//     with [OutcomeUnknownText] and error_code "tool_outcome_unknown", and
//     the error wraps [ErrToolOutcomeUnknown]; the next call places the
//     session again, possibly on another executor;
//   - other errors (ctx, [ErrAssignRejected], protocol errors) are returned
//     with a zero result.
func (h *Hub) RunTool(ctx context.Context, req AssignRequest, call tool.Call) (tool.Result, error) {
	for {
		h.mu.Lock()
		l := h.leases[req.SessionID]
		h.mu.Unlock()
		if l == nil {
			var err error
			if l, err = h.WaitAssign(ctx, req); err != nil {
				return tool.Result{}, err
			}
		}
		res, err := l.CallTool(ctx, call)
		switch {
		case errors.Is(err, ErrToolOutcomeUnknown):
			res := tool.ErrorResult(OutcomeUnknownText)
			res.ErrorCode = "tool_outcome_unknown"
			return res, err
		case errors.Is(err, executor.ErrSessionEnded) && !errors.Is(l.Err(), executor.ErrSessionEnded):
			continue // the lease was lost before the call was sent: place again
		}
		return res, err
	}
}

// EndSession releases the session's lease, if it has one (session.release
// with reason "ended").
func (h *Hub) EndSession(ctx context.Context, sessionID string) error {
	h.mu.Lock()
	l := h.leases[sessionID]
	h.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Release(ctx)
}
