package fakeopenai

import (
	"net/http"

	"github.com/reinsdev/reins/internal/fakeserver"
)

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
		writeError(w, resp.status, resp.header, resp.errType, resp.code, resp.errMsg)
		return
	}
	if !streams(body) && !resp.disconnect && !resp.streamErr && !resp.noFinish {
		if fakeserver.Sleep(r, done, resp.delay) {
			writeCompletion(w, body, resp)
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
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	ok := sse.Event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	calls := 0
	for _, p := range resp.parts {
		switch p.Type {
		case "tool_call":
			i := calls
			calls++
			half := len(p.Arguments) / 2
			ok = ok && sse.Event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "id": p.ID, "type": "function",
				"function": map[string]any{"name": p.Name, "arguments": p.Arguments[:half]},
			}}}, nil))
			ok = ok && sse.Event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": p.Arguments[half:]},
			}}}, nil))
		case "reasoning":
			for _, w := range fakeserver.Words(p.Text) {
				ok = ok && sse.Event("", chunk(map[string]any{"reasoning_content": w}, nil))
			}
		default:
			for _, w := range fakeserver.Words(p.Text) {
				ok = ok && sse.Event("", chunk(map[string]any{"content": w}, nil))
			}
		}
	}
	if !ok {
		return
	}
	switch {
	case resp.disconnect:
		sse.Disconnect()
	case resp.streamErr:
		sse.Event("", errorBody(resp.errType, resp.code, resp.errMsg))
		return
	case resp.noFinish:
		return
	}
	ok = sse.Event("", chunk(map[string]any{}, resp.finishReason))
	if ok && includeUsage(body) {
		u := resp.usage
		ok = sse.Event("", map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{},
			"usage": map[string]any{
				"prompt_tokens":         u.PromptTokens,
				"completion_tokens":     u.CompletionTokens,
				"total_tokens":          u.PromptTokens + u.CompletionTokens,
				"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
			},
		})
	}
	if ok {
		sse.Event("", "[DONE]")
	}
}

func includeUsage(body map[string]any) bool {
	so, _ := body["stream_options"].(map[string]any)
	v, _ := so["include_usage"].(bool)
	return v
}
