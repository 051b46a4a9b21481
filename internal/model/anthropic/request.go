package anthropic

import (
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/reinsdev/reins/internal/model"
)

// fastModeBeta is the beta some models require for the speed parameter.
const fastModeBeta = "fast-mode-2026-02-01"

// params maps req onto Messages API parameters. Prompt caching marks the
// stable prefix with the four ephemeral breakpoints the API allows: the last
// tool, the system prompt, the last block of the last message (written for
// the next turn) and the last block of the user message before it (read
// back from the previous turn).
func (p *Provider) params(req *model.Request) (anthropic.MessageNewParams, []option.RequestOption, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(p.maxTokens),
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = int64(req.MaxTokens)
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{
			Text:         req.System,
			CacheControl: anthropic.NewCacheControlEphemeralParam(),
		}}
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return params, nil, err
		}
		params.Tools = append(params.Tools, tool)
	}
	if n := len(params.Tools); n > 0 {
		if cc := params.Tools[n-1].GetCacheControl(); cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
	for i, m := range req.Messages {
		msg, err := messageParam(m)
		if err != nil {
			return params, nil, at(err, "messages[%d]", i)
		}
		if len(messageContent(msg)) == 0 {
			// The API rejects empty messages; leaving one out merges its
			// neighbours, which the API does with consecutive turns anyway.
			continue
		}
		params.Messages = append(params.Messages, msg)
	}
	if n := len(params.Messages); n > 0 {
		markLastBlock(params.Messages[n-1])
		// The previous turn wrote the cache up to the end of the user
		// message before the last one; a breakpoint there reads it back
		// exactly, however many blocks the turn added since (the API looks
		// back only about 20 blocks from a breakpoint).
		for i := n - 2; i >= 0; i-- {
			if params.Messages[i].OfUser != nil {
				markLastBlock(params.Messages[i])
				break
			}
		}
	}
	// Effort and speed pass through unchanged: the API validates them and
	// answers 400 (KindInvalid) for a value the model does not support.
	if req.Effort != "" {
		params.OutputConfig.Effort = anthropic.OutputConfigEffort(req.Effort)
	}
	var ropts []option.RequestOption
	if req.Speed != "" {
		params.Speed = anthropic.MessageNewParamsSpeed(req.Speed)
		ropts = append(ropts, option.WithHeaderAdd("anthropic-beta", fastModeBeta))
	}
	return params, ropts, nil
}

// The Anthropic server tool types reins offers (model.Tool.Server).
const (
	WebSearchTool = "web_search_20250305"
	WebFetchTool  = "web_fetch_20250910"
)

func toolParam(t model.Tool) (anthropic.ToolUnionParam, error) {
	switch t.Server {
	case "":
	case WebSearchTool:
		return anthropic.ToolUnionParam{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}, nil
	case WebFetchTool:
		return anthropic.ToolUnionParam{OfWebFetchTool20250910: &anthropic.WebFetchTool20250910Param{}}, nil
	default:
		return anthropic.ToolUnionParam{}, invalidf("tool %q: unknown server tool type %q", t.Name, t.Server)
	}
	schema := anthropic.ToolInputSchemaParam{}
	if len(t.InputSchema) > 0 {
		var fields map[string]any
		if err := json.Unmarshal(t.InputSchema, &fields); err != nil {
			return anthropic.ToolUnionParam{}, invalidf("tool %q: input_schema is not a JSON object: %v", t.Name, err)
		}
		if props, ok := fields["properties"]; ok {
			schema.Properties = props
		}
		if req, ok := fields["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					schema.Required = append(schema.Required, s)
				}
			}
		}
		delete(fields, "type")
		delete(fields, "properties")
		delete(fields, "required")
		if len(fields) > 0 {
			schema.ExtraFields = fields
		}
	}
	tool := anthropic.ToolUnionParamOfTool(schema, t.Name)
	if t.Description != "" {
		tool.OfTool.Description = anthropic.String(t.Description)
	}
	return tool, nil
}

func messageParam(m model.Message) (anthropic.MessageParam, error) {
	var blocks []anthropic.ContentBlockParamUnion
	for j, b := range m.Content {
		if b.Type == model.BlockText && b.Text == "" {
			// The API rejects empty text blocks; they carry nothing.
			continue
		}
		block, err := contentBlock(b)
		if err != nil {
			return anthropic.MessageParam{}, at(err, "content[%d]", j)
		}
		blocks = append(blocks, block)
	}
	switch m.Role {
	case model.RoleUser:
		return anthropic.NewUserMessage(blocks...), nil
	case model.RoleAssistant:
		return anthropic.NewAssistantMessage(blocks...), nil
	}
	return anthropic.MessageParam{}, invalidf("unknown role %q", m.Role)
}

// markLastBlock puts a cache breakpoint on the last block of m.
func markLastBlock(m anthropic.MessageParam) {
	blocks := messageContent(m)
	if len(blocks) == 0 {
		return
	}
	if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
		*cc = anthropic.NewCacheControlEphemeralParam()
	}
}

func messageContent(m anthropic.MessageParam) []anthropic.ContentBlockParamUnion {
	switch {
	case m.OfUser != nil:
		return m.OfUser.Content
	case m.OfAssistant != nil:
		return m.OfAssistant.Content
	}
	return nil
}

func contentBlock(b model.Block) (anthropic.ContentBlockParamUnion, error) {
	switch b.Type {
	case model.BlockText:
		return anthropic.NewTextBlock(b.Text), nil
	case model.BlockImage:
		img, err := imageBlock(b.Source)
		if err != nil {
			return anthropic.ContentBlockParamUnion{}, err
		}
		return anthropic.ContentBlockParamUnion{OfImage: img}, nil
	case model.BlockDocument:
		doc, err := documentBlock(b)
		if err != nil {
			return anthropic.ContentBlockParamUnion{}, err
		}
		return anthropic.ContentBlockParamUnion{OfDocument: doc}, nil
	case model.BlockToolUse:
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		return anthropic.NewToolUseBlock(b.ID, input, b.Name), nil
	case model.BlockToolResult:
		return toolResultBlock(b)
	case model.BlockServer:
		return serverBlock(b.Raw)
	}
	return anthropic.ContentBlockParamUnion{}, invalidf("unsupported content block type %q", b.Type)
}

// serverBlock replays a server tool block verbatim: the API wants its own
// blocks back (encrypted contents included) exactly as it sent them.
func serverBlock(raw json.RawMessage) (anthropic.ContentBlockParamUnion, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return anthropic.ContentBlockParamUnion{}, invalidf("server block is not a JSON object: %v", err)
	}
	switch head.Type {
	case "server_tool_use":
		b := param.Override[anthropic.ServerToolUseBlockParam](raw)
		return anthropic.ContentBlockParamUnion{OfServerToolUse: &b}, nil
	case "web_search_tool_result":
		b := param.Override[anthropic.WebSearchToolResultBlockParam](raw)
		return anthropic.ContentBlockParamUnion{OfWebSearchToolResult: &b}, nil
	case "web_fetch_tool_result":
		b := param.Override[anthropic.WebFetchToolResultBlockParam](raw)
		return anthropic.ContentBlockParamUnion{OfWebFetchToolResult: &b}, nil
	}
	return anthropic.ContentBlockParamUnion{}, invalidf("unsupported server block type %q", head.Type)
}

func toolResultBlock(b model.Block) (anthropic.ContentBlockParamUnion, error) {
	res := &anthropic.ToolResultBlockParam{ToolUseID: b.ToolUseID}
	if b.IsError {
		res.IsError = anthropic.Bool(true)
	}
	for i, c := range b.Content {
		var part anthropic.ToolResultBlockParamContentUnion
		switch c.Type {
		case model.BlockText:
			if c.Text == "" {
				continue
			}
			part.OfText = &anthropic.TextBlockParam{Text: c.Text}
		case model.BlockImage:
			img, err := imageBlock(c.Source)
			if err != nil {
				return anthropic.ContentBlockParamUnion{}, at(err, "tool_result content[%d]", i)
			}
			part.OfImage = img
		case model.BlockDocument:
			doc, err := documentBlock(c)
			if err != nil {
				return anthropic.ContentBlockParamUnion{}, at(err, "tool_result content[%d]", i)
			}
			part.OfDocument = doc
		default:
			return anthropic.ContentBlockParamUnion{}, invalidf("tool_result content[%d]: unsupported block type %q", i, c.Type)
		}
		res.Content = append(res.Content, part)
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: res}, nil
}

// invalidf returns a KindInvalid error: the transcript cannot be sent as is,
// so no retry can help.
func invalidf(format string, args ...any) *model.Error {
	return &model.Error{Kind: model.KindInvalid, Message: fmt.Sprintf(format, args...)}
}

// at prefixes the message of a mapping error with where it happened
// ("messages[2]: content[0]: ...").
func at(err error, format string, args ...any) error {
	me := model.AsError(err)
	return &model.Error{Kind: me.Kind, Message: fmt.Sprintf(format, args...) + ": " + me.Message, Err: me.Err}
}
