package connector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reinsdev/reins/internal/connector"
)

// A turn of a session runner: list the tools at turn start, call the one the
// model chose, map failures to session errors. (Not run: it needs servers.)
func ExamplePool() {
	ctx := context.Background()
	var creds connector.Credentials // e.g. &connector.VaultCredentials{Store: st, Keyring: keys}
	pool, err := connector.NewPool(connector.Config{
		Servers:     []connector.Server{{Name: "github", URL: "https://mcp.example.com/mcp"}},
		VaultIDs:    []string{"vlt_…"},
		Credentials: creds,
	})
	if err != nil {
		return // the agent's mcp_servers are invalid
	}
	defer pool.Close() // when the session ends

	tools, err := pool.Tools(ctx)
	var cerr *connector.Error
	if errors.As(err, &cerr) {
		// session.error {type: cerr.Kind.SessionErrorType(), mcp_server_name: cerr.ServerName,
		// message: cerr.Message}, retrying while cerr.Retryable(), else exhausted.
		return
	}
	_ = tools // offered to the model under tools[i].Name

	t, ok := pool.Lookup("mcp__github__search_issues")
	if !ok {
		return // not an MCP tool
	}
	// agent.mcp_tool_use {mcp_server_name: t.Server, name: t.ToolName, input}
	res, err := pool.Call(ctx, t.Server, t.ToolName, json.RawMessage(`{"q":"bug"}`))
	switch {
	case errors.Is(err, context.Canceled): // user.interrupt
	case errors.As(err, &cerr): // session.error as above
	case err == nil:
		// agent.mcp_tool_result {mcp_tool_use_id, content: res.Content, is_error: res.IsError}
		fmt.Println(res.IsError)
	}
}
