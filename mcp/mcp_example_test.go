package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/mcp"
)

// A server in compact mode publishes three outer tools; call_tool runs an
// operation by name.
func ExampleServer() {
	srv := mcp.NewServer(mcp.Options{Name: "greeter"})
	err := srv.Add(mcp.Operation{
		Name:        "greet",
		Group:       "demo",
		Description: "Greets someone.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}`),
		Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
		Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
			var in struct{ Who string }
			if err := json.Unmarshal(c.Arguments, &in); err != nil {
				return nil, err
			}
			return mcp.StructuredResult(map[string]string{"greeting": "hello, " + in.Who}), nil
		},
	})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()

	tools, _ := cs.ListTools(ctx, nil)
	for _, t := range tools.Tools {
		fmt.Println(t.Name)
	}
	res, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "greet", "arguments": map[string]any{"who": "reins"}}})
	fmt.Println(res.Content[0].(*sdk.TextContent).Text)
	res, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "greet", "arguments": map[string]any{"who": 42}}})
	fmt.Println(res.IsError, res.Content[0].(*sdk.TextContent).Text)
	// Output:
	// call_tool
	// get_tool_details
	// search_tools
	// {"greeting":"hello, reins"}
	// true {"failure":{"code":"invalid_arguments","message":"arguments do not match the input schema at /who: got number, want string","retryable":false}}
}

// NewFailure refuses codes outside the closed set.
func ExampleNewFailure() {
	f := mcp.NewFailure(mcp.CodeBusy, "every slot is taken", nil)
	fmt.Println(f.Code(), f.Retryable())
	f = mcp.NewFailure("oops", "not a code", nil)
	fmt.Println(f.Code(), f.Message())
	// Output:
	// busy true
	// internal internal error
}
