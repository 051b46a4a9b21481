package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/reinsdev/reins/internal/model"
)

// params maps req onto Chat Completions parameters.
//
// Effort maps to reasoning_effort. Speed has no Chat Completions
// counterpart (service_tier changes pricing, not just latency) and is
// ignored. Chat Completions caches prompt prefixes automatically, so there
// are no breakpoints to place.
func params(req *model.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(modelName(req.Model)),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.Effort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(req.Effort)
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, tool)
	}
	for i, m := range req.Messages {
		msgs, err := messageParams(m)
		if err != nil {
			return p, at(err, "messages[%d]", i)
		}
		p.Messages = append(p.Messages, msgs...)
	}
	return p, nil
}

func toolParam(t model.Tool) (openai.ChatCompletionToolUnionParam, error) {
	fn := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		fn.Description = openai.String(t.Description)
	}
	if len(t.InputSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return openai.ChatCompletionToolUnionParam{}, invalidf("tool %q: input_schema is not a JSON object: %v", t.Name, err)
		}
		fn.Parameters = schema
	} else {
		fn.Parameters = shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	}
	return openai.ChatCompletionFunctionTool(fn), nil
}

// messageParams maps one transcript message onto one or more chat messages:
// an assistant turn becomes one assistant message (text and tool calls); a
// user turn becomes one tool message per tool_result, in order, followed by
// one user message with the remaining blocks. Tool messages carry text
// only, so the images and documents of a tool result join that user message,
// introduced by a text part naming the tool call.
func messageParams(m model.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case model.RoleAssistant:
		msg, err := assistantMessage(m.Content)
		if err != nil {
			return nil, err
		}
		return []openai.ChatCompletionMessageParamUnion{msg}, nil
	case model.RoleUser:
		return userMessages(m.Content)
	}
	return nil, invalidf("unknown role %q", m.Role)
}

func assistantMessage(blocks []model.Block) (openai.ChatCompletionMessageParamUnion, error) {
	var a openai.ChatCompletionAssistantMessageParam
	var text strings.Builder
	for j, b := range blocks {
		switch b.Type {
		case model.BlockText:
			text.WriteString(b.Text)
		case model.BlockToolUse:
			args := string(b.Input)
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       b.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
				},
			})
		default:
			return openai.ChatCompletionMessageParamUnion{}, invalidf("content[%d]: %s blocks cannot appear in an assistant message", j, b.Type)
		}
	}
	if text.Len() > 0 || len(a.ToolCalls) == 0 {
		a.Content.OfString = openai.String(text.String())
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
}

func userMessages(blocks []model.Block) ([]openai.ChatCompletionMessageParamUnion, error) {
	var msgs []openai.ChatCompletionMessageParamUnion
	var toolParts, parts []openai.ChatCompletionContentPartUnionParam
	for j, b := range blocks {
		switch b.Type {
		case model.BlockToolResult:
			msg, extra, err := toolResult(b)
			if err != nil {
				return nil, at(err, "content[%d]", j)
			}
			msgs = append(msgs, msg)
			toolParts = append(toolParts, extra...)
		case model.BlockToolUse:
			return nil, invalidf("content[%d]: tool_use blocks cannot appear in a user message", j)
		default:
			part, err := contentPart(b)
			if err != nil {
				return nil, at(err, "content[%d]", j)
			}
			parts = append(parts, part)
		}
	}
	// Tool messages must follow the assistant's tool calls directly, so the
	// user message with everything else comes after them.
	if all := append(toolParts, parts...); len(all) > 0 {
		msgs = append(msgs, openai.UserMessage(all))
	}
	return msgs, nil
}

// toolResult returns the tool message of a tool_result and the parts
// (images, documents) that must travel in the following user message.
func toolResult(b model.Block) (openai.ChatCompletionMessageParamUnion, []openai.ChatCompletionContentPartUnionParam, error) {
	var texts []string
	var extra []openai.ChatCompletionContentPartUnionParam
	for i, c := range b.Content {
		if c.Type == model.BlockText {
			texts = append(texts, c.Text)
			continue
		}
		part, err := contentPart(c)
		if err != nil {
			return openai.ChatCompletionMessageParamUnion{}, nil, at(err, "tool_result content[%d]", i)
		}
		extra = append(extra, part)
	}
	if len(extra) > 0 {
		texts = append(texts, fmt.Sprintf("(%d attachment(s) of this result follow in the next user message)", len(extra)))
		intro := openai.TextContentPart(fmt.Sprintf("Attachments of the result of tool call %s:", b.ToolUseID))
		extra = append([]openai.ChatCompletionContentPartUnionParam{intro}, extra...)
	}
	text := strings.Join(texts, "\n")
	if b.IsError {
		text = "Error: " + text
	}
	return openai.ToolMessage(text, b.ToolUseID), extra, nil
}

// invalidf returns a KindInvalid error: the transcript cannot be sent as is,
// so no retry can help.
func invalidf(format string, args ...any) *model.Error {
	return &model.Error{Kind: model.KindInvalid, Message: fmt.Sprintf(format, args...)}
}

// at prefixes the message of a mapping error with where it happened.
func at(err error, format string, args ...any) error {
	me := model.AsError(err)
	return &model.Error{Kind: me.Kind, Message: fmt.Sprintf(format, args...) + ": " + me.Message, Err: me.Err}
}
