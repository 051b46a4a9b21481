package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/turntoken"
	ma "github.com/reinsdev/reins/managedagents"
)

// toolCallsPattern is the platform tools endpoint's route. It
// authenticates with the tools token of a running agent-end turn, not
// with an API key.
const toolCallsPattern = "POST /v1/sessions/{id}/tool_calls"

// ToolCallsPath is the path of a session's platform tools endpoint.
func ToolCallsPath(sessionID string) string { return "/v1/sessions/" + sessionID + "/tool_calls" }

// toolCallBody bounds a platform tool call's body.
const toolCallBody = smallBody

// toolCallRequest is the body of a platform tool call.
type toolCallRequest struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
	// Approval names the agent.tool_use an earlier call recorded with
	// approval_required, which the user has confirmed since.
	Approval *toolCallApproval `json:"approval,omitempty"`
}

type toolCallApproval struct {
	ToolUseID string `json:"tool_use_id"`
}

// toolCallResponse is the outcome of a platform tool call.
type toolCallResponse struct {
	// ToolCallID is the agent.tool_use the call recorded ("" when it
	// recorded none).
	ToolCallID string            `json:"tool_call_id"`
	Status     string            `json:"status"` // completed, in_progress
	Content    []ma.ContentBlock `json:"content"`
	IsError    bool              `json:"is_error"`
	ErrorCode  string            `json:"error_code,omitempty"`
}

// ToolsTokens verifies the tools tokens of agent-end turns;
// *turntoken.Issuer is one.
type ToolsTokens interface {
	// Verify checks tok, a token of kind, and returns its claims
	// (also when it expired, with turntoken.ErrExpired).
	Verify(kind turntoken.Kind, tok string) (turntoken.Claims, error)
}

// toolCallStore is what the platform tools endpoint keeps in the
// database: the record of each call, and the log it reads a cut-off
// call's result from (the store is one).
type toolCallStore interface {
	// BeginToolCall records c unless a call of the session has its key:
	// it returns the recorded call and whether it is c.
	BeginToolCall(ctx context.Context, c store.ToolCall) (store.ToolCall, bool, error)
	SetToolCallUse(ctx context.Context, sessionID, key, toolUseID string) error
	FinishToolCall(ctx context.Context, sessionID, key string, outcome []byte) error
	DeleteToolCall(ctx context.Context, sessionID, key string) error
	ReadLog(ctx context.Context, sessionID string, after int64, limit int) ([]store.Entry, error)
}

// agentTurns finds the running agent-end turns (Harness is one).
type agentTurns interface {
	AgentTurn(sessionID, turnID string) (*harness.ActiveTurn, error)
}

// toolCallAPI serves the platform tools endpoint.
type toolCallAPI struct {
	st    toolCallStore
	turns agentTurns
	// tokens is nil when the server has no platform tools endpoint.
	tokens ToolsTokens
	log    *slog.Logger
}

// toolCallRoutes registers the platform tools endpoint.
func (s *Server) toolCallRoutes() {
	tc := &toolCallAPI{st: s.cfg.Store, turns: s.cfg.Harness, tokens: s.cfg.TurnTokens, log: s.log}
	s.handle(toolCallsPattern, toolCallBody, tc.toolCall)
}

// toolCall serves the platform tools endpoint: an agent end runs a
// built-in tool of the session's agent through the harness, with the
// tools token of its turn and an Idempotency-Key.
func (tc *toolCallAPI) toolCall(w http.ResponseWriter, r *http.Request) error {
	sessionID := r.PathValue("id")
	claims, err := tc.toolsToken(r, sessionID)
	if err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	if key == "" {
		return badRequest("the %s header is required (1 to %d characters): a call repeated with its key answers its first outcome", idempotencyHeader, maxIdempotencyKey)
	}
	var req toolCallRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return badRequest("name: required")
	}
	if len(req.Input) > 0 && !isJSONObject(req.Input) {
		return badRequest("input: must be an object")
	}
	if req.Approval != nil && req.Approval.ToolUseID == "" {
		return badRequest("approval.tool_use_id: required")
	}
	ctx := context.WithoutCancel(r.Context()) // the record outlives a client gone
	rec, created, err := tc.st.BeginToolCall(ctx, store.ToolCall{SessionID: sessionID, Key: key, RequestHash: requestHash(req), CreatedAt: time.Now()})
	if err != nil {
		return err
	}
	if !created {
		out, err := tc.replay(ctx, rec, requestHash(req))
		if err != nil {
			return err
		}
		writeJSON(w, out)
		return nil
	}
	out, logged, err := tc.runToolCall(ctx, claims, key, req)
	switch {
	case err != nil && logged:
		// Its tool use is in the log (the server is stopping): the
		// record stays in progress, and answers the result the next
		// runner gives the tool use.
	case err != nil || out.ErrorCode == harness.ToolErrorEnvironmentUnavailable:
		// Nothing ran: the key may be used again.
		if derr := tc.st.DeleteToolCall(ctx, sessionID, key); derr != nil && err == nil {
			err = derr
		}
	default:
		b, merr := json.Marshal(out)
		if merr != nil {
			return merr
		}
		err = tc.st.FinishToolCall(ctx, sessionID, key, b)
	}
	if err != nil {
		return err
	}
	writeJSON(w, out)
	return nil
}

// runToolCall hands the call to the turn the token names; logged
// reports that the call's agent.tool_use is in the log.
func (tc *toolCallAPI) runToolCall(ctx context.Context, claims turntoken.Claims, key string, req toolCallRequest) (_ toolCallResponse, logged bool, _ error) {
	var started atomic.Bool
	turn, err := tc.turns.AgentTurn(claims.SessionID, claims.TurnID)
	if err == nil {
		call := harness.PlatformToolCall{Name: req.Name, Input: req.Input, Started: func(toolUseID string) {
			started.Store(true)
			if err := tc.st.SetToolCallUse(ctx, claims.SessionID, key, toolUseID); err != nil {
				tc.log.Warn("tool call: record its tool use", "session", claims.SessionID, "err", err)
			}
		}}
		if req.Approval != nil {
			call.Approval = req.Approval.ToolUseID
		}
		var res harness.PlatformToolResult
		if res, err = turn.CallTool(ctx, call); err == nil {
			content := res.Content
			if content == nil {
				content = []ma.ContentBlock{}
			}
			return toolCallResponse{ToolCallID: res.ToolUseID, Status: "completed", Content: content, IsError: res.IsError, ErrorCode: res.ErrorCode}, true, nil
		}
	}
	if errors.Is(err, harness.ErrTurnInactive) {
		err = conflict("turn_inactive: turn %s of session %s is not running on this server; a running turn's tools token calls the tools endpoint", claims.TurnID, claims.SessionID)
	}
	return toolCallResponse{}, started.Load(), err
}

// replay answers a call whose key is recorded: its outcome, in_progress
// while it runs, or idempotency_key_reused for another body. A call
// without outcome whose tool use has a result in the log was cut off (by
// a server stop) after its tool ran, or the next runner answered it: its
// outcome is that result, recorded now.
func (tc *toolCallAPI) replay(ctx context.Context, rec store.ToolCall, hash string) (toolCallResponse, error) {
	if rec.Outcome == nil && rec.ToolUseID != "" && rec.RequestHash == hash {
		res, err := tc.toolResult(ctx, rec.SessionID, rec.ToolUseID)
		if err != nil || res == nil {
			return recorded(rec, hash), err
		}
		out := toolCallResponse{ToolCallID: rec.ToolUseID, Status: "completed", Content: res.Content, IsError: res.IsError != nil && *res.IsError}
		if out.Content == nil {
			out.Content = []ma.ContentBlock{}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return out, err
		}
		return out, tc.st.FinishToolCall(ctx, rec.SessionID, rec.Key, b)
	}
	return recorded(rec, hash), nil
}

// toolResult returns the agent.tool_result of a tool use, nil if the log
// has none.
func (tc *toolCallAPI) toolResult(ctx context.Context, sessionID, toolUseID string) (*ma.Event, error) {
	const batch = 1000
	for after := int64(0); ; {
		entries, err := tc.st.ReadLog(ctx, sessionID, after, batch)
		if err != nil {
			return nil, err
		}
		for i := range entries {
			if ev := &entries[i].Event; ev.Type == ma.EventAgentToolResult && ev.ToolUseID == toolUseID {
				return ev, nil
			}
			after = entries[i].Seq
		}
		if len(entries) < batch {
			return nil, nil
		}
	}
}

// recorded answers from a call's record alone.
func recorded(rec store.ToolCall, hash string) toolCallResponse {
	switch {
	case rec.RequestHash != hash:
		return toolCallResponse{Status: "completed", IsError: true, ErrorCode: harness.ToolErrorIdempotencyKeyReused,
			Content: textContent("This Idempotency-Key was used for another call (another name, input or approval): use a new key for a new call.")}
	case rec.Outcome == nil:
		return toolCallResponse{ToolCallID: rec.ToolUseID, Status: "in_progress", IsError: true, ErrorCode: harness.ToolErrorInProgress,
			Content: textContent("The call with this Idempotency-Key is still running: call again with the same key for its outcome.")}
	}
	var out toolCallResponse
	if err := json.Unmarshal(rec.Outcome, &out); err != nil {
		return toolCallResponse{Status: "completed", IsError: true, Content: textContent("The recorded outcome of this call cannot be read.")}
	}
	return out
}

// toolsToken authenticates a platform tool call: the tools token of a
// turn of the session (an API key is not enough).
func (tc *toolCallAPI) toolsToken(r *http.Request, sessionID string) (turntoken.Claims, error) {
	unauthorized := func(msg string) error { return errf(http.StatusUnauthorized, ma.ErrAuthentication, "%s", msg) }
	if tc.tokens == nil {
		return turntoken.Claims{}, notFound("this server has no platform tools endpoint")
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return turntoken.Claims{}, unauthorized("the platform tools endpoint takes the tools token of a running agent-end turn (turn.start's tools.token, or tools_token.refresh) as Authorization: Bearer; an API key is not enough")
	}
	c, err := tc.tokens.Verify(turntoken.Tools, tok)
	switch {
	case errors.Is(err, turntoken.ErrExpired):
		return c, unauthorized("the tools token expired at " + c.ExpiresAt.Format(time.RFC3339) + ": get a fresh one with tools_token.refresh")
	case err != nil:
		return c, unauthorized("not a valid tools token: the platform tools endpoint takes the tools token of a running agent-end turn, not an API key")
	case c.SessionID != sessionID:
		return c, errf(http.StatusForbidden, ma.ErrPermission, "the tools token is for session %s, not %s", c.SessionID, sessionID)
	}
	return c, nil
}

// requestHash identifies a call's body: name, input (as a JSON value) and
// approval.
func requestHash(req toolCallRequest) string {
	var input any = map[string]any{} // no input is {}
	if len(req.Input) > 0 {
		json.Unmarshal(req.Input, &input) // checked by the caller
	}
	canon, _ := json.Marshal([]any{req.Name, input, req.Approval})
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func textContent(text string) []ma.ContentBlock {
	return []ma.ContentBlock{{Type: "text", Text: text}}
}
