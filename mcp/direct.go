package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// addDirectTool publishes e as its own MCP tool.
func (s *Server) addDirectTool(e *entry) {
	t := &sdk.Tool{
		Name:        e.op.Name,
		Title:       e.op.Title,
		Description: e.op.Description,
		InputSchema: e.inRaw,
		Annotations: e.op.Annotations.sdk(e.op.Title),
	}
	if len(e.op.OutputSchema) > 0 {
		t.OutputSchema = orFailure(string(e.op.OutputSchema))
	}
	if e.op.View != "" {
		t.Meta = sdk.Meta{"ui": map[string]any{"resourceUri": e.op.View}}
	}
	name := e.op.Name
	s.sdk.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return s.invoke(ctx, req, name, req.Params.Arguments)
	})
}

// directMiddleware makes unknown and denied tools indistinguishable in
// direct mode: tools/list shows only what the caller may call, and a call
// to any other name answers the unavailable failure.
func (s *Server) directMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "tools/call":
			r, ok := req.(*sdk.CallToolRequest)
			if !ok {
				break
			}
			caller := s.caller(ctx, r.Extra)
			if _, ok := s.visible(ctx, caller, r.Params.Name); !ok {
				return s.failed(r.Params.Name, caller, unavailable(r.Params.Name, nil)), nil
			}
		case "tools/list":
			res, err := next(ctx, method, req)
			if err != nil || s.opts.Allow == nil {
				return res, err
			}
			lr, ok := res.(*sdk.ListToolsResult)
			if !ok {
				return res, err
			}
			caller := s.caller(ctx, req.GetExtra())
			kept := lr.Tools[:0:0]
			for _, t := range lr.Tools {
				if _, ok := s.visible(ctx, caller, t.Name); ok {
					kept = append(kept, t)
				}
			}
			out := *lr
			out.Tools = kept
			return &out, nil
		}
		return next(ctx, method, req)
	}
}
