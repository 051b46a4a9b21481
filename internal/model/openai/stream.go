package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/classify"
)

// accumulator builds a model.Response from the chunks of one stream and
// forwards text and reasoning to the sink as they arrive. Only choice 0 is
// read (n is never set).
type accumulator struct {
	sink model.Sink
	log  *slog.Logger

	chunks       int
	text         strings.Builder
	calls        map[int64]*toolCall
	finishReason string
	usage        model.Usage
	thinking     bool
}

// toolCall is a streamed tool call under construction.
type toolCall struct {
	index    int64
	id, name string
	args     strings.Builder
}

func newAccumulator(sink model.Sink, log *slog.Logger) *accumulator {
	return &accumulator{sink: sink, log: log, calls: make(map[int64]*toolCall)}
}

func (a *accumulator) add(chunk openai.ChatCompletionChunk) {
	a.chunks++
	if chunk.JSON.Usage.Valid() {
		u := chunk.Usage
		cached := u.PromptTokensDetails.CachedTokens
		// model.Usage counts cache reads apart from the input, as the
		// Messages API does; prompt_tokens includes them.
		a.usage = model.Usage{
			InputTokens:          max(u.PromptTokens-cached, 0),
			OutputTokens:         u.CompletionTokens,
			CacheReadInputTokens: cached,
		}
	}
	for _, c := range chunk.Choices {
		if c.Index != 0 {
			continue
		}
		d := c.Delta
		if !a.thinking && reasoning(d) {
			a.thinking = true
			a.sink.Thinking()
		}
		if d.Content != "" {
			a.text.WriteString(d.Content)
			a.sink.TextDelta(0, d.Content)
		}
		for _, tc := range d.ToolCalls {
			call := a.calls[tc.Index]
			if call == nil {
				call = &toolCall{index: tc.Index}
				a.calls[tc.Index] = call
			}
			if tc.ID != "" {
				call.id = tc.ID
			}
			if call.name == "" {
				// Servers send the name once or repeat it; never split.
				call.name = tc.Function.Name
			}
			call.args.WriteString(tc.Function.Arguments)
		}
		if c.FinishReason != "" {
			a.finishReason = c.FinishReason
		}
	}
}

// reasoning reports whether a delta carries reasoning, which compatible
// servers stream as reasoning_content (vLLM, DeepSeek) or reasoning
// (OpenRouter, Ollama).
func reasoning(d openai.ChatCompletionChunkChoiceDelta) bool {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		if f, ok := d.JSON.ExtraFields[k]; ok {
			var s string
			if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
				return true
			}
		}
	}
	return false
}

// response returns the accumulated response, or an error when the stream
// ended before the model finished.
func (a *accumulator) response(ctx context.Context) (*model.Response, error) {
	if a.chunks == 0 {
		return nil, classify.BrokenStream(ctx, "no chunk before the end of the stream")
	}
	if a.finishReason == "" {
		return nil, classify.BrokenStream(ctx, "no finish_reason")
	}
	resp := &model.Response{Usage: a.usage, Thinking: a.thinking}
	if a.text.Len() > 0 {
		resp.Content = append(resp.Content, model.Block{Type: model.BlockText, Text: a.text.String()})
	}
	calls := make([]*toolCall, 0, len(a.calls))
	for _, c := range a.calls {
		calls = append(calls, c)
	}
	slices.SortFunc(calls, func(x, y *toolCall) int { return cmp.Compare(x.index, y.index) })
	for _, c := range calls {
		resp.Content = append(resp.Content, model.Block{Type: model.BlockToolUse, ID: c.id, Name: c.name, Input: a.arguments(ctx, c)})
	}
	switch a.finishReason {
	case "length":
		resp.StopReason = model.StopMaxTokens
	case "tool_calls", "function_call":
		resp.StopReason = model.StopToolUse
	case "content_filter":
		// The provider's content filter cut the answer: a refusal,
		// without a category.
		resp.StopReason = model.StopRefusal
		resp.Refusal = &model.Refusal{}
	default:
		resp.StopReason = model.StopEndTurn
	}
	if len(calls) > 0 && resp.StopReason == model.StopEndTurn {
		// Some compatible servers finish tool calls with "stop".
		resp.StopReason = model.StopToolUse
	}
	return resp, nil
}

// arguments returns the streamed arguments of a call: {} when there are
// none, and {} (logged) when they are not valid JSON, so that the
// transcript stays sendable.
func (a *accumulator) arguments(ctx context.Context, c *toolCall) json.RawMessage {
	s := strings.TrimSpace(c.args.String())
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if !json.Valid([]byte(s)) {
		a.log.WarnContext(ctx, "openai tool call arguments are not valid JSON; using {}", "tool", c.name, "id", c.id, "bytes", len(s))
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(s)
}
