package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// PlatformToolCall is a call of the platform tools endpoint: a built-in
// tool of the session's agent (bash, read, write, …) that reins runs on
// the session's hands and records in the session's log.
type PlatformToolCall struct {
	Name  string
	Input any // marshalled to JSON; a json.RawMessage is sent as is
	// IdempotencyKey makes a retried call safe: the same key with the
	// same call answers the first outcome and never runs the tool twice.
	// Empty: CallTool makes one (its retries reuse it).
	IdempotencyKey string
	// Approval is the ToolCallID of an earlier call of the same tool and
	// input that answered [ToolErrorApprovalRequired] and that the user
	// has confirmed since (the user.tool_confirmation is an input of the
	// turn): the call answers the tool's result, or
	// [ToolErrorPermissionDenied] for a denial.
	Approval string
}

// PlatformToolResult is the outcome of a platform tool call. A tool that
// ran and failed, and a call reins refused, are results with IsError;
// ErrorCode says why for a refusal ([ToolErrorEnvironmentUnavailable],
// [ToolErrorPermissionDenied], [ToolErrorApprovalRequired],
// [ToolErrorApprovalInvalid], [ToolErrorIdempotencyKeyReused]; an open
// set).
type PlatformToolResult struct {
	// ToolCallID is the agent.tool_use the call recorded ("" when it
	// recorded none).
	ToolCallID string `json:"tool_call_id"`
	// Status is "completed", or "in_progress" for a call whose key is
	// still running (CallTool waits for those).
	Status string `json:"status"`
	ToolResult
}

// ToolCallHTTPError is a platform tool call the endpoint refused as a
// request: a bad request (400), a token refused (401, 403), a turn not
// running (409, the error's message starts with turn_inactive).
type ToolCallHTTPError struct {
	StatusCode int
	Type       string
	Message    string
}

func (e *ToolCallHTTPError) Error() string {
	return fmt.Sprintf("executor: tools endpoint: %d %s: %s", e.StatusCode, e.Type, e.Message)
}

// toolsRefreshMargin: a tools token that expires sooner is refreshed
// before a call.
const toolsRefreshMargin = 30 * time.Second

// CallTool calls the platform tools endpoint with the turn's tools token
// (t.Start.Tools), refreshing it (tools_token.refresh) when it is about
// to expire or the endpoint answers 401, and waiting while the call's key
// is in progress. A refused request is a *ToolCallHTTPError; a refused
// refresh is the *RPCError of [Turn.RefreshToolsToken].
func (t *Turn) CallTool(ctx context.Context, call PlatformToolCall) (PlatformToolResult, error) {
	body, err := toolCallBody(call)
	if err != nil {
		return PlatformToolResult{}, err
	}
	if call.IdempotencyKey == "" {
		call.IdempotencyKey = rand.Text()
	}
	refreshed := false
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		grant, err := t.toolsGrant(ctx, false)
		if err != nil {
			return PlatformToolResult{}, err
		}
		res, err := t.postToolCall(ctx, grant, call.IdempotencyKey, body)
		var he *ToolCallHTTPError
		switch {
		case errors.As(err, &he) && he.StatusCode == http.StatusUnauthorized && !refreshed:
			refreshed = true
			if _, err := t.toolsGrant(ctx, true); err != nil {
				return PlatformToolResult{}, err
			}
			continue
		case err != nil:
			return PlatformToolResult{}, err
		case res.Status == "in_progress":
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		return res, nil
	}
}

func toolCallBody(call PlatformToolCall) ([]byte, error) {
	type approval struct {
		ToolUseID string `json:"tool_use_id"`
	}
	body := struct {
		Name     string    `json:"name"`
		Input    any       `json:"input,omitempty"`
		Approval *approval `json:"approval,omitempty"`
	}{Name: call.Name, Input: call.Input}
	if call.Approval != "" {
		body.Approval = &approval{call.Approval}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("executor: encode the tool call: %w", err)
	}
	return b, nil
}

// toolsGrant returns the turn's tools grant, refreshed first when force
// is set or it is about to expire.
func (t *Turn) toolsGrant(ctx context.Context, force bool) (TokenGrant, error) {
	t.mu.Lock()
	g := t.Start.Tools
	t.mu.Unlock()
	if g == nil && !force {
		force = true // no tools token in turn.start: ask, to get the reason
	}
	if !force && time.Until(g.ExpiresAt) > toolsRefreshMargin {
		return *g, nil
	}
	fresh, err := t.RefreshToolsToken(ctx)
	if err != nil {
		return TokenGrant{}, err
	}
	t.mu.Lock()
	if fresh.URL == "" && t.Start.Tools != nil {
		fresh.URL = t.Start.Tools.URL
	}
	t.Start.Tools = &fresh
	t.mu.Unlock()
	return fresh, nil
}

// maxToolCallResponse bounds what CallTool reads of a response.
const maxToolCallResponse = 64 << 20

func (t *Turn) postToolCall(ctx context.Context, g TokenGrant, key string, body []byte) (PlatformToolResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL, bytes.NewReader(body))
	if err != nil {
		return PlatformToolResult{}, fmt.Errorf("executor: tools endpoint %q: %w", g.URL, err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	hc := t.http
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return PlatformToolResult{}, fmt.Errorf("executor: tools endpoint: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxToolCallResponse))
	if err != nil {
		return PlatformToolResult{}, fmt.Errorf("executor: tools endpoint: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var env struct {
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(data, &env)
		return PlatformToolResult{}, &ToolCallHTTPError{StatusCode: resp.StatusCode, Type: env.Error.Type, Message: env.Error.Message}
	}
	var res PlatformToolResult
	if err := json.Unmarshal(data, &res); err != nil {
		return PlatformToolResult{}, fmt.Errorf("executor: tools endpoint: decode the result: %w", err)
	}
	return res, nil
}
