package mcp

import (
	"context"
	"encoding/json"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An Operation is one unit of work the server publishes.
type Operation struct {
	// Name identifies the operation; it must match [A-Za-z0-9_.-]{1,128}.
	Name string
	// Group is a free-form category that search_tools can filter on.
	Group string
	// Title is a short human-readable name.
	Title string
	// Description tells a model what the operation does.
	Description string
	// InputSchema is the JSON Schema of the arguments object. Nil means an
	// object with no declared properties.
	InputSchema json.RawMessage
	// OutputSchema, if non-nil, is the JSON Schema that every successful
	// structured result must satisfy.
	OutputSchema json.RawMessage
	// Annotations are the MCP behaviour hints.
	Annotations Annotations
	// View, if set, is the ui:// view (one of [Options.Views]) an MCP Apps
	// host renders for this operation's results. A view that is not
	// approved makes the definition invalid.
	View string
	// Timeout bounds one call. Zero means the server's default.
	Timeout time.Duration
	// Handler runs the operation.
	Handler Handler
}

// Annotations are the MCP tool hints of an operation. They are hints for
// clients, never a security boundary.
type Annotations struct {
	// ReadOnly reports that the operation does not modify its environment.
	ReadOnly bool
	// Destructive reports that the operation may perform destructive
	// updates. Nil means the MCP default (true).
	Destructive *bool
	// Idempotent reports that repeating a call has no additional effect.
	Idempotent bool
	// OpenWorld reports that the operation reaches outside entities. Nil
	// means the MCP default (true).
	OpenWorld *bool
}

func (a Annotations) sdk(title string) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{
		ReadOnlyHint:    a.ReadOnly,
		DestructiveHint: a.Destructive,
		IdempotentHint:  a.Idempotent,
		OpenWorldHint:   a.OpenWorld,
		Title:           title,
	}
}

// A Handler runs one call of an operation. It returns a result made with
// [StructuredResult], [TextResult] or [ContentResult], or an error; an error
// that is not a [*Failure] is reported as [CodeInternal] with the error
// logged, except that errors caused by the call's context ending become
// [CodeTimeout] or [CodeCancelled].
type Handler func(ctx context.Context, call *Call) (*Result, error)

// A Call is one invocation of an operation as seen by its handler.
type Call struct {
	// Operation is the name of the operation being called.
	Operation string
	// Caller identifies who is calling, as decided by [Options.Identify].
	Caller string
	// Arguments holds the validated arguments object.
	Arguments json.RawMessage
	// Request is the underlying MCP request, for handlers that need
	// protocol features such as progress or logging.
	Request *sdk.CallToolRequest

	chain *chain
}

// A Result is the successful outcome of a call. The zero Result is not a
// valid outcome: construct one with [StructuredResult], [TextResult] or
// [ContentResult].
type Result struct {
	made       bool
	structured any
	content    []sdk.Content
	view       string
}

// StructuredResult returns a result whose structured content is v (which
// must marshal to a JSON object) mirrored as a JSON text block.
func StructuredResult(v any) *Result { return &Result{made: true, structured: v} }

// TextResult returns a result holding a single text block.
func TextResult(text string) *Result {
	return &Result{made: true, content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// ContentResult returns a result holding the given content blocks.
func ContentResult(content ...sdk.Content) *Result {
	return &Result{made: true, content: content}
}

// WithView returns a copy of r that names the ui:// view an MCP Apps host
// should render. The view must be one of [Options.Views].
func (r *Result) WithView(uri string) *Result {
	c := *r
	c.view = uri
	return &c
}
