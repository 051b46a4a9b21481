// Package model defines how the harness talks to language models: a
// transcript goes in, a stream of content blocks comes out. Providers live in
// sub-packages (anthropic, openai, scripted); Router picks one by model id.
package model

import (
	"context"
	"encoding/json"
)

// Provider turns a transcript into one model response.
//
// Stream calls sink as the response is produced (for previews) and returns
// the complete response. A failed call returns an error that wraps *Error so
// the harness can apply its retry policy; any other error is treated as
// KindRequestFailed.
type Provider interface {
	Stream(ctx context.Context, req *Request, sink Sink) (*Response, error)
}

// Request is one model call.
type Request struct {
	// Model is the model id as the agent names it (for example
	// "claude-sonnet-5-5", "openai/gpt-4o" or "scripted/demo").
	Model string
	// Effort and Speed are the optional fields of the agent's model object
	// ("" when unset). Providers map them where their API supports them.
	Effort string
	Speed  string
	// System is the system prompt.
	System string
	// Messages alternate between the user and assistant roles, starting
	// with the user.
	Messages []Message
	// Tools the model may call.
	Tools []Tool
	// MaxTokens bounds the response; 0 means the provider's default.
	MaxTokens int
	// SessionID identifies the session the call belongs to (for logs and
	// for deterministic providers); it is never sent to a model API.
	SessionID string
	// Purpose is "" for an agent's turn, PurposeGrader for the grader of
	// an outcome (for deterministic providers); it is never sent to a
	// model API.
	Purpose string
}

// PurposeGrader marks the request of an outcome's grader.
const PurposeGrader = "grader"

// Role is the author of a message.
type Role string

// The two roles of a transcript.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one turn of the transcript.
type Message struct {
	Role    Role
	Content []Block
}

// BlockType names the kind of a content block.
type BlockType string

// The content block types a transcript carries.
const (
	BlockText       BlockType = "text"
	BlockImage      BlockType = "image"
	BlockDocument   BlockType = "document"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
	// BlockServer is a block of a server tool the model's API runs itself
	// (Anthropic's server_tool_use, web_search_tool_result,
	// web_fetch_tool_result): Raw holds it as the API sent it, and it goes
	// back to the API verbatim.
	BlockServer BlockType = "server"
	// BlockRedacted stands, in a response, for content the provider
	// withheld by policy: the harness records it as a {"type":"redacted"}
	// block of the agent.message. Requests never carry it (the harness
	// gives the model a text placeholder instead).
	BlockRedacted BlockType = "redacted"
)

// Block is one content block. Which fields are set depends on Type.
type Block struct {
	Type BlockType

	// Text is the text of a text block.
	Text string

	// Source is the raw Managed Agents source object of an image or
	// document block ({"type":"base64",...}, {"type":"url",...}, ...).
	Source json.RawMessage
	// Title and Context are optional document fields.
	Title   string
	Context string

	// ID, Name and Input describe a tool_use block.
	ID    string
	Name  string
	Input json.RawMessage

	// ToolUseID, Content and IsError describe a tool_result block.
	ToolUseID string
	Content   []Block
	IsError   bool

	// Raw is the exact JSON of a server block (BlockServer). ID and Name
	// are then set for a server tool use, ToolUseID for its result.
	Raw json.RawMessage
}

// Tool is a tool offered to the model.
type Tool struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object.
	InputSchema json.RawMessage
	// Server, when set, names a server tool of the model's API by its
	// type (Anthropic: "web_search_20250305", "web_fetch_20250910"): the
	// API runs it, and Description and InputSchema are unused.
	Server string
}

// StopReason says why the model stopped.
type StopReason string

// Stop reasons a provider reports.
const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	// StopPauseTurn: the API paused a long turn of server tools; sending
	// the transcript back with the response continues it.
	StopPauseTurn StopReason = "pause_turn"
	// StopRefusal: the model refused to go on (a safety classifier);
	// Response.Refusal may say why.
	StopRefusal StopReason = "refusal"
)

// Refusal is what a provider says of a refusal: the policy category
// ("cyber", "bio", …; empty when none) and an explanation not to parse
// (empty when none).
type Refusal struct {
	Category    string
	Explanation string
}

// Response is a complete model response.
type Response struct {
	// Content holds text, tool_use and server blocks in the order the
	// model produced them.
	Content    []Block
	StopReason StopReason
	Usage      Usage
	// Thinking reports that the model produced (hidden) reasoning.
	Thinking bool
	// Refusal details a StopRefusal, when the provider gave them.
	Refusal *Refusal
}

// Usage counts the tokens of one model call. The three input counts are
// disjoint, as in the Messages API: their sum is the whole prompt.
type Usage struct {
	// InputTokens counts the prompt tokens neither read from nor written
	// to the prompt cache.
	InputTokens int64
	// OutputTokens counts the generated tokens, reasoning included.
	OutputTokens int64
	// CacheCreationInputTokens counts the prompt tokens written to the
	// cache (0 for providers that cache implicitly).
	CacheCreationInputTokens int64
	// CacheReadInputTokens counts the prompt tokens read from the cache.
	CacheReadInputTokens int64
	// WebSearchRequests and WebFetchRequests count the server tool calls
	// the API ran during the call.
	WebSearchRequests int64
	WebFetchRequests  int64
}

// Sink receives a response while it streams. Implementations must be cheap
// and must not block: the harness turns them into preview events.
type Sink interface {
	// Thinking reports that the model started reasoning.
	Thinking()
	// TextDelta appends text to the text block at index (0-based among the
	// response's text blocks, contiguous).
	TextDelta(index int, text string)
}

// DiscardSink is a Sink that ignores everything.
type DiscardSink struct{}

// Thinking implements Sink.
func (DiscardSink) Thinking() {}

// TextDelta implements Sink.
func (DiscardSink) TextDelta(int, string) {}
