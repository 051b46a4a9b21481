package anthropic

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/classify"
)

// accumulator builds a model.Response from the events of one stream and
// forwards text and thinking to the sink as they arrive.
type accumulator struct {
	sink model.Sink
	log  *slog.Logger

	started bool
	stopped bool
	// blocks maps the API's content block index to the block being built;
	// order keeps the kept blocks (text and tool_use) in arrival order.
	blocks map[int64]*partial
	order  []*partial
	texts  int

	stopReason anthropic.StopReason
	refusal    *model.Refusal
	usage      model.Usage
	thinking   bool
}

// partial is a text, tool_use or server block under construction.
type partial struct {
	typ       model.BlockType
	textIndex int
	text      strings.Builder
	id, name  string
	json      strings.Builder
	// raw is a server block as content_block_start sent it; a
	// server_tool_use's input comes in input_json_delta events after it.
	raw       string
	toolUseID string
}

func newAccumulator(sink model.Sink, log *slog.Logger) *accumulator {
	return &accumulator{sink: sink, log: log, blocks: make(map[int64]*partial)}
}

func (a *accumulator) add(ev anthropic.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		a.started = true
		u := ev.Message.Usage
		a.usage = model.Usage{
			InputTokens:              u.InputTokens,
			OutputTokens:             u.OutputTokens,
			CacheCreationInputTokens: u.CacheCreationInputTokens,
			CacheReadInputTokens:     u.CacheReadInputTokens,
		}
	case "content_block_start":
		a.startBlock(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		b := a.blocks[ev.Index]
		if b == nil {
			return
		}
		switch ev.Delta.Type {
		case "text_delta":
			if b.typ == model.BlockText && ev.Delta.Text != "" {
				b.text.WriteString(ev.Delta.Text)
				a.sink.TextDelta(b.textIndex, ev.Delta.Text)
			}
		case "input_json_delta":
			if b.typ == model.BlockToolUse || b.typ == model.BlockServer {
				b.json.WriteString(ev.Delta.PartialJSON)
			}
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			a.stopReason = ev.Delta.StopReason
		}
		if d := ev.Delta.StopDetails; d.JSON.Type.Valid() && d.Type == "refusal" {
			a.refusal = &model.Refusal{Category: string(d.Category), Explanation: d.Explanation}
		}
		// The usage of message_delta is cumulative; a field that is absent
		// keeps the value of message_start.
		u := ev.Usage
		if u.JSON.InputTokens.Valid() {
			a.usage.InputTokens = u.InputTokens
		}
		if u.JSON.OutputTokens.Valid() {
			a.usage.OutputTokens = u.OutputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			a.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			a.usage.CacheReadInputTokens = u.CacheReadInputTokens
		}
		if u.JSON.ServerToolUse.Valid() {
			a.usage.WebSearchRequests = u.ServerToolUse.WebSearchRequests
			a.usage.WebFetchRequests = u.ServerToolUse.WebFetchRequests
		}
	case "message_stop":
		a.stopped = true
	}
}

func (a *accumulator) startBlock(index int64, cb anthropic.ContentBlockStartEventContentBlockUnion) {
	switch cb.Type {
	case "text":
		b := &partial{typ: model.BlockText, textIndex: a.texts}
		a.texts++
		a.blocks[index] = b
		a.order = append(a.order, b)
		if cb.Text != "" {
			b.text.WriteString(cb.Text)
			a.sink.TextDelta(b.textIndex, cb.Text)
		}
	case "tool_use":
		b := &partial{typ: model.BlockToolUse, id: cb.ID, name: cb.Name}
		a.blocks[index] = b
		a.order = append(a.order, b)
	case "server_tool_use", "web_search_tool_result", "web_fetch_tool_result":
		b := &partial{typ: model.BlockServer, raw: cb.RawJSON(), id: cb.ID, name: string(cb.Name), toolUseID: cb.ToolUseID}
		a.blocks[index] = b
		a.order = append(a.order, b)
	case "thinking", "redacted_thinking":
		a.thinking = true
		a.sink.Thinking()
	}
}

// response returns the accumulated response, or an error when the stream
// ended before message_stop.
func (a *accumulator) response(ctx context.Context) (*model.Response, error) {
	if !a.started {
		return nil, classify.BrokenStream(ctx, "no message_start event")
	}
	if !a.stopped {
		return nil, classify.BrokenStream(ctx, "no message_stop event")
	}
	resp := &model.Response{
		StopReason: stopReason(a.stopReason),
		Refusal:    a.refusal,
		Usage:      a.usage,
		Thinking:   a.thinking,
		Content:    make([]model.Block, 0, len(a.order)),
	}
	for _, b := range a.order {
		switch b.typ {
		case model.BlockText:
			resp.Content = append(resp.Content, model.Block{Type: model.BlockText, Text: b.text.String()})
		case model.BlockToolUse:
			resp.Content = append(resp.Content, model.Block{Type: model.BlockToolUse, ID: b.id, Name: b.name, Input: a.toolInput(ctx, b)})
		case model.BlockServer:
			raw, err := a.serverRaw(ctx, b)
			if err != nil {
				return nil, err
			}
			resp.Content = append(resp.Content, model.Block{Type: model.BlockServer, Raw: raw, ID: b.id, Name: b.name, ToolUseID: b.toolUseID})
		}
	}
	return resp, nil
}

// toolInput returns the streamed input of a tool call. A call without input
// gets {}; input that is not valid JSON (cut by max_tokens) is replaced by
// {} so the transcript stays sendable, and logged.
func (a *accumulator) toolInput(ctx context.Context, b *partial) json.RawMessage {
	s := strings.TrimSpace(b.json.String())
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if !json.Valid([]byte(s)) {
		a.log.WarnContext(ctx, "anthropic tool call input is not valid JSON; using {}", "tool", b.name, "id", b.id, "bytes", len(s))
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(s)
}

// serverRaw returns a server block as the API will want it back: the
// content_block_start block, with a server_tool_use's streamed input in
// place of the empty one that event carries.
func (a *accumulator) serverRaw(ctx context.Context, b *partial) (json.RawMessage, error) {
	if !json.Valid([]byte(b.raw)) {
		return nil, classify.BrokenStream(ctx, "a server tool block is not valid JSON")
	}
	if b.id == "" || b.json.Len() == 0 {
		return json.RawMessage(b.raw), nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(b.raw), &fields); err != nil {
		return nil, classify.BrokenStream(ctx, "a server tool block is not a JSON object")
	}
	fields["input"] = a.toolInput(ctx, b)
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, classify.BrokenStream(ctx, "re-encoding a server tool block: "+err.Error())
	}
	return out, nil
}

func stopReason(r anthropic.StopReason) model.StopReason {
	switch r {
	case anthropic.StopReasonPauseTurn:
		return model.StopPauseTurn
	case anthropic.StopReasonToolUse:
		return model.StopToolUse
	case anthropic.StopReasonMaxTokens, "model_context_window_exceeded":
		return model.StopMaxTokens
	case anthropic.StopReasonRefusal:
		return model.StopRefusal
	}
	// end_turn, stop_sequence and unknown reasons all end the model's
	// turn.
	return model.StopEndTurn
}
