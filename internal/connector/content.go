package connector

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	ma "github.com/reinsdev/reins/managedagents"
)

// Result is the outcome of a tool call as the model reads it.
type Result struct {
	// Content is the result's content as API content blocks (text and
	// image; other MCP content is described in text).
	Content []ma.ContentBlock
	// IsError is set when the tool failed. The call itself succeeded: the
	// model reads the content.
	IsError bool
	// Failure is the reins MCP module failure envelope
	// {"failure":{"code","message","retryable"}} when the result has one.
	Failure *Failure
	// Structured is the result's structuredContent, if any.
	Structured json.RawMessage
}

// Failure is a reins MCP module operation failure.
type Failure struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

func errorResult(format string, args ...any) *Result {
	return &Result{IsError: true, Content: []ma.ContentBlock{{Type: "text", Text: fmt.Sprintf(format, args...)}}}
}

// convertResult turns an MCP CallToolResult into a Result.
func convertResult(r *mcp.CallToolResult) *Result {
	out := &Result{IsError: r.IsError, Content: []ma.ContentBlock{}}
	for _, c := range r.Content {
		out.Content = append(out.Content, convertContent(c))
	}
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			out.Structured = b
			if len(out.Content) == 0 {
				out.Content = append(out.Content, ma.ContentBlock{Type: "text", Text: string(b)})
			}
		}
	}
	out.Failure = findFailure(out)
	return out
}

// findFailure reads a failure envelope from the structured content, or
// from the first text block (the module mirrors it there).
func findFailure(r *Result) *Failure {
	var env struct {
		Failure *Failure `json:"failure"`
	}
	if len(r.Structured) > 0 && json.Unmarshal(r.Structured, &env) == nil && env.Failure != nil && env.Failure.Code != "" {
		return env.Failure
	}
	if r.IsError && len(r.Content) > 0 && r.Content[0].Type == "text" {
		if json.Unmarshal([]byte(r.Content[0].Text), &env) == nil && env.Failure != nil && env.Failure.Code != "" {
			return env.Failure
		}
	}
	return nil
}

func convertContent(c mcp.Content) ma.ContentBlock {
	switch c := c.(type) {
	case *mcp.TextContent:
		return ma.ContentBlock{Type: "text", Text: c.Text}
	case *mcp.ImageContent:
		src, _ := json.Marshal(map[string]string{"type": "base64", "media_type": c.MIMEType, "data": base64.StdEncoding.EncodeToString(c.Data)})
		return ma.ContentBlock{Type: "image", Source: src}
	case *mcp.AudioContent:
		return ma.ContentBlock{Type: "text", Text: fmt.Sprintf("[audio content, %s, %d bytes, not shown]", c.MIMEType, len(c.Data))}
	case *mcp.ResourceLink:
		return ma.ContentBlock{Type: "text", Text: fmt.Sprintf("[resource link %q: %s]", c.Name, c.URI)}
	case *mcp.EmbeddedResource:
		if c.Resource == nil {
			return ma.ContentBlock{Type: "text", Text: "[empty embedded resource]"}
		}
		if c.Resource.Blob == nil {
			return ma.ContentBlock{Type: "text", Text: c.Resource.Text}
		}
		return ma.ContentBlock{Type: "text", Text: fmt.Sprintf("[resource %s, %s, %d bytes, not shown]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob))}
	}
	b, _ := json.Marshal(c)
	return ma.ContentBlock{Type: "text", Text: string(b)}
}
