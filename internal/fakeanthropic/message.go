package fakeanthropic

import (
	"encoding/json"
	"net/http"

	"github.com/reinsdev/reins/internal/fakeserver"
)

// streams reports whether a call asked for a stream ("stream": true).
func streams(body map[string]any) bool {
	s, _ := body["stream"].(bool)
	return s
}

// writeMessage answers a call that did not ask for a stream with the
// whole message as JSON.
func writeMessage(w http.ResponseWriter, body map[string]any, resp Response) {
	content := make([]any, 0, len(resp.blocks))
	for _, b := range resp.blocks {
		switch b.Type {
		case "tool_use":
			content = append(content, map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": json.RawMessage(b.Input)})
		case "thinking":
			content = append(content, map[string]any{"type": "thinking", "thinking": b.Text, "signature": "sig_fake"})
		default:
			content = append(content, map[string]any{"type": "text", "text": b.Text})
		}
	}
	model, _ := body["model"].(string)
	u := resp.usage
	w.Header().Set("request-id", "req_fake")
	fakeserver.WriteJSON(w, http.StatusOK, resp.header, map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": resp.stopReason, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                u.InputTokens,
			"output_tokens":               u.OutputTokens,
			"cache_creation_input_tokens": u.CacheCreationInputTokens,
			"cache_read_input_tokens":     u.CacheReadInputTokens,
		},
	})
}
