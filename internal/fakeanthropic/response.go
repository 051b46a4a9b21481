package fakeanthropic

import (
	"net/http"
	"time"
)

// Block is one content block of a scripted reply.
type Block struct {
	// Type is "text", "tool_use", "thinking", "server_tool_use",
	// "web_search_tool_result" or "web_fetch_tool_result".
	Type string
	// Text is the text of a text block or the reasoning of a thinking block;
	// it streams as one text_delta per word.
	Text string
	// ID, Name and Input describe a tool_use block; Input is JSON and
	// streams in two input_json_delta fragments.
	// A server_tool_use streams as a tool_use does.
	ID, Name, Input string
	// Whole is the complete content block of a server tool result, sent
	// in its content_block_start as the API does (no deltas).
	Whole map[string]any
}

// ServerToolUseBlock returns a server_tool_use block (name "web_search"
// or "web_fetch"); input is a JSON object.
func ServerToolUseBlock(id, name, input string) Block {
	return Block{Type: "server_tool_use", ID: id, Name: name, Input: input}
}

// SearchResult is one result of a web_search_tool_result block.
type SearchResult struct {
	URL, Title, EncryptedContent, PageAge string
}

// WebSearchResultBlock returns a web_search_tool_result block answering the
// server_tool_use toolUseID.
func WebSearchResultBlock(toolUseID string, results ...SearchResult) Block {
	content := make([]any, len(results))
	for i, r := range results {
		content[i] = map[string]any{"type": "web_search_result", "url": r.URL, "title": r.Title,
			"encrypted_content": r.EncryptedContent, "page_age": r.PageAge}
	}
	return Block{Type: "web_search_tool_result", Whole: map[string]any{"type": "web_search_tool_result",
		"tool_use_id": toolUseID, "content": content}}
}

// WebFetchResultBlock returns a web_fetch_tool_result block answering the
// server_tool_use toolUseID with a plain-text document.
func WebFetchResultBlock(toolUseID, url, title, text string) Block {
	return Block{Type: "web_fetch_tool_result", Whole: map[string]any{"type": "web_fetch_tool_result",
		"tool_use_id": toolUseID, "content": map[string]any{
			"type": "web_fetch_result", "url": url, "retrieved_at": "2026-12-02T08:00:00Z",
			"content": map[string]any{"type": "document", "title": title, "citations": nil,
				"source": map[string]any{"type": "text", "media_type": "text/plain", "data": text}},
		}}}
}

// TextBlock returns a text block.
func TextBlock(text string) Block { return Block{Type: "text", Text: text} }

// ToolUseBlock returns a tool_use block; input is a JSON object.
func ToolUseBlock(id, name, input string) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: input}
}

// ThinkingBlock returns a thinking block.
func ThinkingBlock(thinking string) Block { return Block{Type: "thinking", Text: thinking} }

// Usage is the token usage a reply reports.
type Usage struct {
	InputTokens, OutputTokens                      int64
	CacheCreationInputTokens, CacheReadInputTokens int64
	// Server tool calls, reported in message_delta's server_tool_use.
	WebSearchRequests, WebFetchRequests int64
}

// Response scripts the answer to one call. Build it with Reply, Text,
// Failure or Hang and refine it with the With and Then methods, which return
// a modified copy.
type Response struct {
	blocks     []Block
	stopReason string
	usage      Usage
	delay      time.Duration
	header     http.Header

	status  int
	errType string
	errMsg  string

	streamErr  bool // an error event after the content
	disconnect bool // the connection drops after the content
	noStop     bool // the stream ends cleanly without message_stop
	hang       bool
}

// Reply returns a successful streamed reply made of blocks. Its stop reason
// is "tool_use" when a block is a tool call and "end_turn" otherwise; its
// usage is 10 input and 5 output tokens.
func Reply(blocks ...Block) Response {
	stop := "end_turn"
	for _, b := range blocks {
		if b.Type == "tool_use" {
			stop = "tool_use"
		}
	}
	return Response{blocks: blocks, stopReason: stop, usage: Usage{InputTokens: 10, OutputTokens: 5}}
}

// Text returns a successful reply of one text block.
func Text(text string) Response { return Reply(TextBlock(text)) }

// Failure returns an HTTP error response with the Anthropic error body
// {"type":"error","error":{"type":errType,"message":message}}.
func Failure(status int, errType, message string) Response {
	return Response{status: status, errType: errType, errMsg: message}
}

// Hang returns a response that never comes: the server holds the call until
// the client gives up or the server closes.
func Hang() Response { return Response{hang: true} }

// WithUsage sets the usage the reply reports.
func (r Response) WithUsage(u Usage) Response { r.usage = u; return r }

// WithStopReason sets the stop reason of message_delta.
func (r Response) WithStopReason(reason string) Response { r.stopReason = reason; return r }

// WithDelay pauses d before every event of the stream, or before the
// response of a Failure.
func (r Response) WithDelay(d time.Duration) Response { r.delay = d; return r }

// WithHeader adds a response header (retry-after, retry-after-ms, ...).
func (r Response) WithHeader(key, value string) Response {
	h := r.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	r.header = h
	return r
}

// ThenError streams the reply's content, then an error event of errType
// (for example "overloaded_error") instead of the end of the message.
func (r Response) ThenError(errType, message string) Response {
	r.streamErr, r.errType, r.errMsg = true, errType, message
	return r
}

// ThenDisconnect streams the reply's content, then drops the connection.
func (r Response) ThenDisconnect() Response { r.disconnect = true; return r }

// WithoutMessageStop ends the stream cleanly but leaves out message_stop.
func (r Response) WithoutMessageStop() Response { r.noStop = true; return r }
