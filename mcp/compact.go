package mcp

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The outer tools of compact mode.
const (
	SearchToolsName    = "search_tools"
	GetToolDetailsName = "get_tool_details"
	CallToolName       = "call_tool"
)

// failureSchema is the JSON Schema of the failure envelope.
const failureSchema = `{"type":"object","required":["failure"],"properties":{"failure":{"type":"object",` +
	`"required":["code","message","retryable"],"properties":{"code":{"type":"string"},` +
	`"message":{"type":"string"},"retryable":{"type":"boolean"}}}}}`

// orFailure returns an output schema admitting success or the failure
// envelope.
func orFailure(success string) json.RawMessage {
	return json.RawMessage(`{"type":"object","anyOf":[` + success + `,` + failureSchema + `]}`)
}

func boolp(b bool) *bool { return &b }

// addCompactTools registers the three outer tools.
func (s *Server) addCompactTools() {
	summary := `{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"group":{"type":"string"},` +
		`"title":{"type":"string"},"description":{"type":"string"}}}`
	s.sdk.AddTool(&sdk.Tool{
		Name:        SearchToolsName,
		Title:       "Search operations",
		Description: "Lists the operations available to you. Filter by a case-insensitive query on name and description, and by group. Use get_tool_details for an operation's input schema, then call_tool to run it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"group":{"type":"string"}},"additionalProperties":false}`),
		OutputSchema: orFailure(`{"type":"object","required":["operations"],"properties":{"operations":{"type":"array","items":` +
			summary + `}}}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolp(false), DestructiveHint: boolp(false)},
	}, s.searchTools)
	s.sdk.AddTool(&sdk.Tool{
		Name:         GetToolDetailsName,
		Title:        "Describe an operation",
		Description:  "Returns an operation's description, input schema, output schema and behaviour hints.",
		InputSchema:  json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"}},"additionalProperties":false}`),
		OutputSchema: orFailure(`{"type":"object","required":["name","inputSchema"]}`),
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolp(false), DestructiveHint: boolp(false)},
	}, s.getToolDetails)
	s.sdk.AddTool(&sdk.Tool{
		Name:         CallToolName,
		Title:        "Run an operation",
		Description:  "Runs the named operation with the given arguments, which must match the operation's input schema from get_tool_details. A failure comes back as {\"failure\":{\"code\",\"message\",\"retryable\"}} with isError set.",
		InputSchema:  json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"arguments":{"type":"object"}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		// Conservative: a client's approval UI sees only call_tool.
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: boolp(true), OpenWorldHint: boolp(true)},
	}, s.callTool)
}

// outerArgs decodes the arguments of an outer tool strictly; a malformed
// envelope is a protocol error.
func outerArgs(req *sdk.CallToolRequest, v any) error {
	raw := req.Params.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	if len(raw) > WireCeiling {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "arguments too large"}
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "malformed " + req.Params.Name + " arguments: " + err.Error()}
	}
	return nil
}

func (s *Server) searchTools(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in struct {
		Query string `json:"query"`
		Group string `json:"group"`
	}
	if err := outerArgs(req, &in); err != nil {
		return nil, err
	}
	caller := s.caller(ctx, req.Extra)
	q := strings.ToLower(in.Query)
	ops := []map[string]any{}
	for _, e := range s.reg.sorted() {
		if _, ok := s.visible(ctx, caller, e.op.Name); !ok {
			continue
		}
		if in.Group != "" && !strings.EqualFold(in.Group, e.op.Group) {
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(e.op.Name+"\n"+e.op.Title+"\n"+e.op.Description), q) {
			continue
		}
		ops = append(ops, map[string]any{"name": e.op.Name, "group": e.op.Group, "title": e.op.Title,
			"description": firstLine(e.op.Description)})
	}
	return structured(map[string]any{"operations": ops}), nil
}

func (s *Server) getToolDetails(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in struct {
		Name *string `json:"name"`
	}
	if err := outerArgs(req, &in); err != nil {
		return nil, err
	}
	if in.Name == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "get_tool_details needs a name"}
	}
	caller := s.caller(ctx, req.Extra)
	e, ok := s.visible(ctx, caller, *in.Name)
	if !ok {
		return s.failed(*in.Name, caller, unavailable(*in.Name, nil)), nil
	}
	return structured(describe(e)), nil
}

func (s *Server) callTool(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := outerArgs(req, &in); err != nil {
		return nil, err
	}
	if in.Name == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "call_tool needs a name"}
	}
	return s.invoke(ctx, req, *in.Name, in.Arguments)
}

// describe is an operation's full definition as published.
func describe(e *entry) map[string]any {
	d := map[string]any{
		"name":        e.op.Name,
		"group":       e.op.Group,
		"title":       e.op.Title,
		"description": e.op.Description,
		"inputSchema": e.inRaw,
		"annotations": e.op.Annotations.sdk(e.op.Title),
	}
	if len(e.op.OutputSchema) > 0 {
		d["outputSchema"] = e.op.OutputSchema
	}
	if e.op.View != "" {
		d["_meta"] = map[string]any{"ui": map[string]any{"resourceUri": e.op.View}}
	}
	return d
}

func structured(v any) *sdk.CallToolResult {
	raw, _ := json.Marshal(v)
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(raw), Content: []sdk.Content{&sdk.TextContent{Text: string(raw)}}}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
