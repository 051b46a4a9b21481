package fakeanthropic

import (
	"net/http"

	"github.com/reinsdev/reins/internal/fakeserver"
)

// Write answers one call with resp, in the wire format, from a handler of
// the caller's own: a fake that decides its answers by what it receives
// rather than from a script. body is the call's decoded JSON (its model is
// echoed); closing done gives up a delay or a hang.
func Write(w http.ResponseWriter, r *http.Request, body map[string]any, resp Response, done <-chan struct{}) {
	serve(w, r, body, resp, done)
}

// serve answers one call with resp.
func serve(w http.ResponseWriter, r *http.Request, body map[string]any, resp Response, done <-chan struct{}) {
	switch {
	case resp.hang:
		fakeserver.Hang(r, done)
		panic(http.ErrAbortHandler)
	case resp.status != 0:
		if !fakeserver.Sleep(r, done, resp.delay) {
			panic(http.ErrAbortHandler)
		}
		writeError(w, resp.status, resp.header, resp.errType, resp.errMsg)
		return
	}
	if !streams(body) && !resp.disconnect && !resp.streamErr && !resp.noStop {
		if fakeserver.Sleep(r, done, resp.delay) {
			writeMessage(w, body, resp)
		}
		return
	}
	for k, vs := range resp.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	model, _ := body["model"].(string)
	sse := fakeserver.NewSSE(w, r, done, resp.delay)
	u := resp.usage
	ok := sse.Event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens":                u.InputTokens,
				"output_tokens":               1,
				"cache_creation_input_tokens": u.CacheCreationInputTokens,
				"cache_read_input_tokens":     u.CacheReadInputTokens,
			},
		},
	})
	ok = ok && sse.Event("ping", map[string]any{"type": "ping"})
	for i, b := range resp.blocks {
		ok = ok && streamBlock(sse, i, b)
	}
	if !ok {
		return
	}
	switch {
	case resp.disconnect:
		sse.Disconnect()
	case resp.streamErr:
		sse.Event("error", map[string]any{
			"type":  "error",
			"error": map[string]any{"type": resp.errType, "message": resp.errMsg},
		})
		return
	}
	ok = sse.Event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": resp.stopReason, "stop_sequence": nil},
		"usage": map[string]any{
			"input_tokens":                u.InputTokens,
			"output_tokens":               u.OutputTokens,
			"cache_creation_input_tokens": u.CacheCreationInputTokens,
			"cache_read_input_tokens":     u.CacheReadInputTokens,
			"server_tool_use": map[string]any{
				"web_search_requests": u.WebSearchRequests,
				"web_fetch_requests":  u.WebFetchRequests,
			},
		},
	})
	if ok && !resp.noStop {
		sse.Event("message_stop", map[string]any{"type": "message_stop"})
	}
}

func streamBlock(sse *fakeserver.SSE, index int, b Block) bool {
	var start map[string]any
	var deltas []map[string]any
	switch b.Type {
	case "tool_use":
		start = map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
		half := len(b.Input) / 2
		for _, frag := range []string{b.Input[:half], b.Input[half:]} {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": frag})
		}
	case "server_tool_use":
		start = map[string]any{"type": "server_tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{},
			"caller": map[string]any{"type": "direct"}}
		half := len(b.Input) / 2
		for _, frag := range []string{b.Input[:half], b.Input[half:]} {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": frag})
		}
	case "web_search_tool_result", "web_fetch_tool_result":
		start = b.Whole
	case "thinking":
		start = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
		for _, w := range fakeserver.Words(b.Text) {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": w})
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": "sig_fake"})
	default:
		start = map[string]any{"type": "text", "text": ""}
		for _, w := range fakeserver.Words(b.Text) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": w})
		}
	}
	if !sse.Event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": start}) {
		return false
	}
	for _, d := range deltas {
		if !sse.Event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d}) {
			return false
		}
	}
	return sse.Event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}
