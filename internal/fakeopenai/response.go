package fakeopenai

import (
	"net/http"
	"time"
)

// Part is one part of a scripted reply.
type Part struct {
	// Type is "text", "tool_call" or "reasoning".
	Type string
	// Text is the content of a text or reasoning part; it streams as one
	// delta per word.
	Text string
	// ID, Name and Arguments describe a tool call; Arguments is JSON and
	// streams in two fragments.
	ID, Name, Arguments string
}

// TextPart returns assistant content. A chat completion has one content
// string: several text parts stream one after the other into it.
func TextPart(text string) Part { return Part{Type: "text", Text: text} }

// ToolCall returns a function tool call; arguments is a JSON object.
func ToolCall(id, name, arguments string) Part {
	return Part{Type: "tool_call", ID: id, Name: name, Arguments: arguments}
}

// Reasoning returns reasoning content, streamed as reasoning_content deltas
// (the vLLM/DeepSeek extension).
func Reasoning(text string) Part { return Part{Type: "reasoning", Text: text} }

// Usage is the token usage a reply reports when the request asked for it
// (stream_options.include_usage).
type Usage struct {
	PromptTokens, CompletionTokens, CachedTokens int64
}

// Response scripts the answer to one call. Build it with Reply, Text,
// Failure or Hang and refine it with the With and Then methods, which return
// a modified copy.
type Response struct {
	parts        []Part
	finishReason string
	usage        Usage
	delay        time.Duration
	header       http.Header

	status  int
	errType string
	code    any
	errMsg  string

	streamErr  bool // an error chunk after the content
	disconnect bool // the connection drops after the content
	noFinish   bool // the stream ends cleanly without finish_reason and [DONE]
	hang       bool
}

// Reply returns a successful streamed reply. Its finish reason is
// "tool_calls" when a part is a tool call and "stop" otherwise; its usage is
// 10 prompt and 5 completion tokens.
func Reply(parts ...Part) Response {
	finish := "stop"
	for _, p := range parts {
		if p.Type == "tool_call" {
			finish = "tool_calls"
		}
	}
	return Response{parts: parts, finishReason: finish, usage: Usage{PromptTokens: 10, CompletionTokens: 5}}
}

// Text returns a successful reply with text content.
func Text(text string) Response { return Reply(TextPart(text)) }

// Failure returns an HTTP error response with the OpenAI error body
// {"error":{"message":message,"type":errType,"param":null,"code":null}};
// set a code with WithCode.
func Failure(status int, errType, message string) Response {
	return Response{status: status, errType: errType, errMsg: message}
}

// Hang returns a response that never comes: the server holds the call until
// the client gives up or the server closes.
func Hang() Response { return Response{hang: true} }

// WithCode sets the error code of a failure or of ThenError: a string such
// as "insufficient_quota" or a number such as 502.
func (r Response) WithCode(code any) Response { r.code = code; return r }

// WithUsage sets the usage the reply reports.
func (r Response) WithUsage(u Usage) Response { r.usage = u; return r }

// WithFinishReason sets the finish reason of the last choice chunk.
func (r Response) WithFinishReason(reason string) Response { r.finishReason = reason; return r }

// WithDelay pauses d before every chunk of the stream, or before the
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

// ThenError streams the reply's content, then an error chunk
// (data: {"error":{...}}) instead of the end of the stream.
func (r Response) ThenError(errType, message string) Response {
	r.streamErr, r.errType, r.errMsg = true, errType, message
	return r
}

// ThenDisconnect streams the reply's content, then drops the connection.
func (r Response) ThenDisconnect() Response { r.disconnect = true; return r }

// WithoutFinish ends the stream cleanly after the content but sends neither
// a finish_reason nor [DONE].
func (r Response) WithoutFinish() Response { r.noFinish = true; return r }
