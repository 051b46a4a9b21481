package fakeopenai

import (
	"net/http"
	"strings"

	"github.com/reinsdev/reins/internal/fakeserver"
)

// streams reports whether a call asked for a stream ("stream": true).
func streams(body map[string]any) bool {
	s, _ := body["stream"].(bool)
	return s
}

// writeCompletion answers a call that did not ask for a stream with the
// whole chat.completion as JSON, its usage included.
func writeCompletion(w http.ResponseWriter, body map[string]any, resp Response) {
	var text, reasoning strings.Builder
	var calls []any
	for _, p := range resp.parts {
		switch p.Type {
		case "tool_call":
			calls = append(calls, map[string]any{"id": p.ID, "type": "function", "function": map[string]any{"name": p.Name, "arguments": p.Arguments}})
		case "reasoning":
			reasoning.WriteString(p.Text)
		default:
			text.WriteString(p.Text)
		}
	}
	msg := map[string]any{"role": "assistant", "content": text.String(), "refusal": nil}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	if reasoning.Len() > 0 {
		msg["reasoning_content"] = reasoning.String()
	}
	model, _ := body["model"].(string)
	u := resp.usage
	w.Header().Set("x-request-id", "req_fake")
	fakeserver.WriteJSON(w, http.StatusOK, resp.header, map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": resp.finishReason, "logprobs": nil}},
		"usage": map[string]any{
			"prompt_tokens":         u.PromptTokens,
			"completion_tokens":     u.CompletionTokens,
			"total_tokens":          u.PromptTokens + u.CompletionTokens,
			"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
		},
	})
}
