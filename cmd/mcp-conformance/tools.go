package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/mcp"
)

// A 1×1 PNG and a tiny WAV, the payloads of the media tools.
var (
	pngPixel, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	wavClip, _  = base64.StdEncoding.DecodeString("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=")
)

func text(s string) sdk.Content { return &sdk.TextContent{Text: s} }

func embedded(uri string) sdk.Content {
	return &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: uri, MIMEType: "text/plain", Text: "This is an embedded resource"}}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func fixed(name, desc string, content ...sdk.Content) mcp.Operation {
	return mcp.Operation{Name: name, Description: desc, Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) {
		return mcp.ContentResult(content...), nil
	}}
}

func tools() []mcp.Operation {
	return []mcp.Operation{
		fixed("test_simple_text", "Returns simple text", text("This is a simple text response for testing.")),
		fixed("test_image_content", "Returns an image", &sdk.ImageContent{Data: pngPixel, MIMEType: "image/png"}),
		fixed("test_audio_content", "Returns audio", &sdk.AudioContent{Data: wavClip, MIMEType: "audio/wav"}),
		fixed("test_embedded_resource", "Returns an embedded resource", embedded("test://embedded-resource")),
		fixed("test_multiple_content_types", "Returns text, an image and a resource",
			text("This is text content"), &sdk.ImageContent{Data: pngPixel, MIMEType: "image/png"}, embedded("test://embedded-in-multiple")),
		{Name: "test_tool_with_logging", Description: "Logs while it runs", Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					pause(ctx, 50*time.Millisecond)
				}
				//lint:ignore SA1019 the conformance suite tests logging, deprecated in MCP without a replacement
				_ = c.Request.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: msg})
			}
			return mcp.TextResult("Tool with logging executed successfully"), nil
		}},
		{Name: "test_tool_with_progress", Description: "Reports progress", Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			tok := c.Request.Params.GetProgressToken()
			for _, p := range []float64{0, 50, 100} {
				if tok != nil {
					_ = c.Request.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100,
						Message: fmt.Sprintf("step %.0f of 100", p)})
				}
				pause(ctx, 50*time.Millisecond)
			}
			return mcp.TextResult(fmt.Sprint(tok)), nil
		}},
		{Name: "test_error_handling", Description: "Always fails", Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) {
			return nil, mcp.NewFailure(mcp.CodeInternal, "this tool intentionally returns an error for testing", errors.New("on purpose"))
		}},
		{Name: "test_sampling", Description: "Asks the client's model",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`),
			Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ Prompt string }
				_ = json.Unmarshal(c.Arguments, &in)
				//lint:ignore SA1019 the conformance suite tests sampling, deprecated in MCP without a replacement
				res, err := c.Request.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 100,
					//lint:ignore SA1019 as above
					Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Prompt}}}})
				if err != nil {
					return nil, err
				}
				reply := "(non-text response)"
				if t, ok := res.Content.(*sdk.TextContent); ok {
					reply = t.Text
				}
				return mcp.TextResult("LLM response: " + reply), nil
			}},
		elicit("test_elicitation", `{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`, func(args json.RawMessage) *sdk.ElicitParams {
			var in struct{ Message string }
			_ = json.Unmarshal(args, &in)
			return &sdk.ElicitParams{Message: in.Message, RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"username": map[string]any{"type": "string", "description": "Your preferred username"}},
				"required":   []string{"username"}}}
		}),
		elicit("test_elicitation_sep1034_defaults", "", func(json.RawMessage) *sdk.ElicitParams {
			return &sdk.ElicitParams{Message: "Test defaults for primitives", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{
					"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
					"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
					"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
					"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
					"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
				}}}
		}),
		elicit("test_elicitation_sep1330_enums", "", func(json.RawMessage) *sdk.ElicitParams {
			opts := []string{"option1", "option2", "option3"}
			titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}}
			return &sdk.ElicitParams{Message: "Test enum schemas", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{
					"untitledSingle": map[string]any{"type": "string", "enum": opts},
					"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
					"legacyEnum":     map[string]any{"type": "string", "enum": opts, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
					"untitledMulti":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": opts}},
					"titledMulti":    map[string]any{"type": "array", "items": map[string]any{"anyOf": titled}},
				}}}
		}),
		{Name: "json_schema_2020_12_tool", Description: "Declares a JSON Schema 2020-12 input schema",
			InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
				`"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
				`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}`),
			Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
				return mcp.TextResult("received " + string(c.Arguments)), nil
			}},
		{Name: "test_reconnection", Description: "Closes its SSE stream once, then answers", Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			if c.Request.Extra != nil && c.Request.Extra.CloseSSEStream != nil {
				c.Request.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: 100 * time.Millisecond})
			}
			pause(ctx, 200*time.Millisecond)
			return mcp.TextResult("Reconnection test completed"), nil
		}},
	}
}

// elicit is a tool that asks the client once and reports the answer.
func elicit(name, schema string, params func(json.RawMessage) *sdk.ElicitParams) mcp.Operation {
	var in json.RawMessage
	if schema != "" {
		in = json.RawMessage(schema)
	}
	return mcp.Operation{Name: name, Description: "Asks the user through elicitation", InputSchema: in,
		Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			res, err := c.Request.Session.Elicit(ctx, params(c.Arguments))
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(fmt.Sprintf("Elicitation completed: action=%s, content=%v", res.Action, res.Content)), nil
		}}
}
