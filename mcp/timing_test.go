package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/reinsdev/reins/mcp"
)

// inMemory connects a client to srv inside a synctest bubble.
func inMemory(t *testing.T, ctx context.Context, srv *mcp.Server) *session {
	st, ct := sdk.NewInMemoryTransports()
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := clientConfig{}.client().Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &session{cs, t}
}

// TestTimeoutsOnFakeClock: an operation's own timeout and the server's
// default timeout, and a Shutdown budget running out, on synctest's clock.
func TestTimeoutsOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		release := make(chan struct{})
		srv := mcp.NewServer(mcp.Options{Logger: quietLogger(), Timeout: time.Hour})
		wait := func(ctx context.Context, _ *mcp.Call) (*mcp.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		_ = srv.Add(
			mcp.Operation{Name: "own", Timeout: 90 * time.Second, Handler: wait},
			mcp.Operation{Name: "default", Handler: wait},
			mcp.Operation{Name: "deaf", Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) {
				<-release
				return mcp.TextResult("done"), nil
			}},
		)
		s := inMemory(t, ctx, srv)
		defer s.Close()
		call := func(name string) *sdk.CallToolResult {
			res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": name}})
			if err != nil {
				t.Fatalf("call %s: %v", name, err)
			}
			return res
		}

		start := time.Now()
		wantFailure(t, call("own"), mcp.CodeTimeout)
		if d := time.Since(start); d != 90*time.Second {
			t.Errorf("own timeout after %v", d)
		}
		start = time.Now()
		wantFailure(t, call("default"), mcp.CodeTimeout)
		if d := time.Since(start); d != time.Hour {
			t.Errorf("default timeout after %v", d)
		}

		done := make(chan *sdk.CallToolResult)
		go func() {
			res, _ := s.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "deaf"}})
			done <- res
		}()
		synctest.Wait()
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		var f *mcp.Failure
		if err := srv.Shutdown(sctx); !errors.As(err, &f) || f.Code() != mcp.CodeCleanupFailed {
			t.Errorf("Shutdown = %v", err)
		}
		close(release)
		if res := <-done; res == nil || res.IsError {
			t.Errorf("deaf: %s", dump(res))
		}
	})
}

// TestOuterOutputSchemasAdmitFailures validates a failure envelope and a
// success against each outer tool's published output schema.
func TestOuterOutputSchemasAdmitFailures(t *testing.T) {
	s := stdioSession(t, clientConfig{})
	lt, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	failure := `{"failure":{"code":"busy","message":"m","retryable":true}}`
	success := map[string]string{
		"search_tools":     `{"operations":[{"name":"echo","group":"text"}]}`,
		"get_tool_details": `{"name":"echo","inputSchema":{"type":"object"}}`,
		"call_tool":        `{"anything":1}`,
	}
	for _, tool := range lt.Tools {
		c := jsonschema.NewCompiler()
		doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(tool.OutputSchema)))
		if err := c.AddResource("mem:///s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("mem:///s.json")
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		for _, inst := range []string{failure, success[tool.Name]} {
			var v any
			_ = json.Unmarshal([]byte(inst), &v)
			if err := sch.Validate(v); err != nil {
				t.Errorf("%s rejects %s: %v", tool.Name, inst, err)
			}
		}
		var junk any
		_ = json.Unmarshal([]byte(`{"failure":{"code":7}}`), &junk)
		if tool.Name != "call_tool" && sch.Validate(junk) == nil {
			t.Errorf("%s accepts a malformed failure", tool.Name)
		}
	}
}
