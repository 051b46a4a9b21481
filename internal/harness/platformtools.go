package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// The error codes of a platform tool call's result (the executor
// package's ToolError* on the agent end's side).
const (
	ToolErrorEnvironmentUnavailable = "environment_unavailable"
	ToolErrorPermissionDenied       = "permission_denied"
	ToolErrorApprovalRequired       = "approval_required"
	ToolErrorApprovalInvalid        = "approval_invalid"
	ToolErrorInProgress             = "in_progress"
	ToolErrorIdempotencyKeyReused   = "idempotency_key_reused"
)

// platformToolCall carries out a call of the platform tools endpoint for
// the agent-end turn the runner runs (tctx is the turn's context): the
// agent's permission policy decides, then the tool runs on the session's
// hands the way the built-in loop runs it, recorded as agent.tool_use and
// agent.tool_result. awaits is set when the call leaves a tool use for
// the user to confirm. An error is a failure of the runner (the store),
// not of the call.
func (r *runner) platformToolCall(ctx, tctx context.Context, sess *ma.Session, call PlatformToolCall, awaits *bool) (PlatformToolResult, error) {
	if call.Approval != "" {
		return r.approvedToolCall(ctx, call)
	}
	policy := planTools(&sess.Agent).builtin[call.Name]
	if policy == "" {
		return refused(ToolErrorPermissionDenied, fmt.Sprintf("The tool %q is not a built-in tool enabled for this agent.", call.Name)), nil
	}
	input := call.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	permission, eval := ma.Evaluate(policy)
	ask := permission == "ask"
	if !ask {
		if why, err := r.handsUnavailable(tctx, sess, call.Name); err != nil || why != "" {
			return refused(ToolErrorEnvironmentUnavailable, why), err
		}
	}
	ev := &ma.Event{Type: ma.EventAgentToolUse, Name: call.Name, Input: input, EvaluatedPermission: permission, Evaluation: eval}
	err := r.update(ctx, func(tx store.Tx) error {
		if tx.Session().Status != ma.StatusRunning {
			return ErrTurnInactive
		}
		now := r.h.now()
		ev.ProcessedAt = &now
		if err := tx.Append(ev); err != nil {
			return err
		}
		if ask {
			return nil
		}
		return tx.MarkToolRunning(ev.ID)
	})
	if err != nil {
		return PlatformToolResult{}, err
	}
	if call.Started != nil {
		call.Started(ev.ID)
	}
	if ask {
		*awaits = true
		res := refused(ToolErrorApprovalRequired, fmt.Sprintf("The tool %s needs the user's confirmation: end the turn; the user.tool_confirmation of %s starts the next one, then call again with approval.tool_use_id %s.", call.Name, ev.ID, ev.ID))
		res.ToolUseID = ev.ID
		return res, nil
	}
	_, end := r.h.obs.ToolCall(r.toolParent(), sess.ID, call.Name, "")
	res := r.toolRunner(call.Name).RunTool(tctx, sess, tool.Call{ID: ev.ID, Name: call.Name, Input: input})
	end(callOutcome(ctx, tctx.Err() != nil && ctx.Err() == nil, res.IsError))
	if ctx.Err() != nil {
		// Shutting down: the mark tells the next runner the tool may
		// have run.
		return PlatformToolResult{}, ctx.Err()
	}
	if err := r.finishTool(ctx, ev.ID, res); err != nil {
		return PlatformToolResult{}, err
	}
	return PlatformToolResult{ToolUseID: ev.ID, Content: res.Content, IsError: res.IsError}, nil
}

// handsUnavailable says why the named tool cannot run on the session's
// hands now ("" when it can): no executor serves a self-hosted
// environment, or pull workers serve it (they take work from the work
// queue, not from the tools endpoint).
func (r *runner) handsUnavailable(ctx context.Context, sess *ma.Session, name string) (string, error) {
	if name == toolset.WebFetch {
		return "", nil // run by this process
	}
	if w := r.h.cfg.Workers; w != nil {
		client, _, err := w.Serving(ctx, sess)
		if err != nil {
			return "", err
		}
		if client {
			return fmt.Sprintf("Pull workers serve environment %s; the platform tools endpoint runs tools on sandboxes and executors only.", sess.EnvironmentID), nil
		}
	}
	p, ok := r.h.cfg.Tools.(tool.Placer)
	if !ok {
		return "", nil
	}
	wait, err := p.Place(ctx, sess)
	switch {
	case ctx.Err() != nil:
		return "The turn was interrupted.", nil
	case err != nil:
		return fmt.Sprintf("The tool %s cannot run: %v", name, err), nil
	case wait != nil:
		return fmt.Sprintf("The tool %s cannot run now: %s", name, wait.Reason), nil
	}
	return "", nil
}

// approvedToolCall answers a call that names a confirmed tool use: the
// harness ran it when the user allowed it (as the built-in loop does), so
// the call answers its result; a denial is permission_denied; anything
// else is approval_invalid.
func (r *runner) approvedToolCall(ctx context.Context, call PlatformToolCall) (PlatformToolResult, error) {
	var use, decision, result *ma.Event
	for after := int64(0); ; {
		entries, err := r.h.cfg.Store.ReadLog(ctx, r.id, after, logBatch)
		if err != nil {
			return PlatformToolResult{}, err
		}
		for i := range entries {
			ev := &entries[i].Event
			switch {
			case ev.ID == call.Approval && ev.Type == ma.EventAgentToolUse:
				use = ev
			case ev.Type == ma.EventUserToolConfirmation && ev.ToolUseID == call.Approval && ev.ProcessedAt != nil:
				decision = ev
			case ev.Type == ma.EventAgentToolResult && ev.ToolUseID == call.Approval:
				result = ev
			}
			after = entries[i].Seq
		}
		if len(entries) < logBatch {
			break
		}
	}
	invalid := func(why string) (PlatformToolResult, error) {
		return refused(ToolErrorApprovalInvalid, fmt.Sprintf("approval.tool_use_id %s: %s", call.Approval, why)), nil
	}
	switch {
	case use == nil:
		return invalid("no agent.tool_use of the session has this id")
	case use.EvaluatedPermission != "ask":
		return invalid("this tool use did not ask for confirmation")
	case use.Name != call.Name || !sameJSON(use.Input, call.Input):
		return invalid(fmt.Sprintf("the call does not match the tool use (%s with its input)", use.Name))
	case decision == nil:
		return invalid("the user has not confirmed this tool use")
	case decision.Result == "deny":
		msg := "The user denied this tool call."
		if decision.DenyMessage != "" {
			msg = "The user denied this tool call: " + decision.DenyMessage
		}
		res := refused(ToolErrorPermissionDenied, msg)
		res.ToolUseID = use.ID
		return res, nil
	case result == nil:
		return invalid("the confirmed tool use has no result")
	}
	return PlatformToolResult{ToolUseID: use.ID, Content: result.Content, IsError: result.IsError != nil && *result.IsError}, nil
}

// refused is a call refused with an error code and a text for the agent.
func refused(code, text string) PlatformToolResult {
	return PlatformToolResult{ErrorCode: code, IsError: true, Content: []ma.ContentBlock{{Type: "text", Text: text}}}
}

// sameJSON reports whether a and b are the same JSON value (an absent
// input is {}).
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if len(a) == 0 {
		a = json.RawMessage("{}")
	}
	if len(b) == 0 {
		b = json.RawMessage("{}")
	}
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return bytes.Equal(ca, cb)
}
