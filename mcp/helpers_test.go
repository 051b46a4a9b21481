package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/mcp"
)

// session is a connected client under test.
type session struct {
	*sdk.ClientSession
	t *testing.T
}

// clientConfig shapes the test client.
type clientConfig struct {
	elicit  func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
	caps    *sdk.ClientCapabilities
	version string // protocol version; "" = the SDK's latest
	noMRTR  bool   // handle input-required results by hand
	caller  string // X-Caller header (HTTP) or environment (stdio)
	mode    string // "compact" or "direct" (stdio)
}

func (c clientConfig) client() *sdk.Client {
	opts := &sdk.ClientOptions{ElicitationHandler: c.elicit, Capabilities: c.caps}
	if c.noMRTR {
		opts.MultiRoundTrip = &sdk.MultiRoundTripOptions{Disabled: true}
	}
	return sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, opts)
}

// stdioSession starts the test binary as a real stdio server child.
func stdioSession(t *testing.T, c clientConfig) *session {
	t.Helper()
	mode := c.mode
	if mode == "" {
		mode = "compact"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REINS_MCP_TEST_SERVE="+mode, "REINS_MCP_TEST_CALLER="+c.caller)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.client().Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: c.version})
	if err != nil {
		t.Fatalf("connect stdio: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &session{cs, t}
}

// httpServer serves srv on a loopback port at /mcp.
func httpServer(t *testing.T, srv *mcp.Server, stateful bool) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcp.HTTPOptions{Stateful: stateful}))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// httpSession connects a client to url.
func httpSession(t *testing.T, url string, c clientConfig) (*session, *headerTransport) {
	t.Helper()
	ht := &headerTransport{caller: c.caller}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.client().Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: ht}, DisableStandaloneSSE: true},
		&sdk.ClientSessionOptions{ProtocolVersion: c.version})
	if err != nil {
		t.Fatalf("connect http: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &session{cs, t}, ht
}

// call runs an operation: through call_tool in compact mode, directly
// otherwise.
func (s *session) call(compact bool, name string, args any) *sdk.CallToolResult {
	s.t.Helper()
	res, err := s.callErr(compact, name, args)
	if err != nil {
		s.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func (s *session) callErr(compact bool, name string, args any) (*sdk.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if compact {
		return s.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": name, "arguments": args}})
	}
	return s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
}

// wireFailure is the decoded failure envelope.
type wireFailure struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// failureOf checks that res is a well-formed failure result and returns
// its envelope: isError, structured content and an identical JSON text
// mirror, the retryable rule, and no private cause on the wire.
func failureOf(t *testing.T, res *sdk.CallToolResult) wireFailure {
	t.Helper()
	if !res.IsError {
		t.Fatalf("result is not an error: %s", dump(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Failure *wireFailure `json:"failure"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Failure == nil {
		t.Fatalf("structured content is not a failure envelope: %s", raw)
	}
	if len(res.Content) == 0 {
		t.Fatalf("failure has no text mirror")
	}
	text, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("failure mirror is %T", res.Content[0])
	}
	var mirror any
	var sc any
	_ = json.Unmarshal([]byte(text.Text), &mirror)
	_ = json.Unmarshal(raw, &sc)
	if m1, _ := json.Marshal(mirror); string(m1) != string(mustJSON(sc)) {
		t.Fatalf("text mirror %s differs from structured content %s", text.Text, raw)
	}
	f := *env.Failure
	if want := f.Code == "busy" || f.Code == "read_failed"; f.Retryable != want {
		t.Fatalf("code %s has retryable=%v", f.Code, f.Retryable)
	}
	if strings.Contains(dump(res), secret) {
		t.Fatalf("private cause leaked: %s", dump(res))
	}
	return f
}

// wantFailure asserts res is a failure with code.
func wantFailure(t *testing.T, res *sdk.CallToolResult, code mcp.Code) wireFailure {
	t.Helper()
	f := failureOf(t, res)
	if f.Code != string(code) {
		t.Fatalf("code = %s (%q), want %s", f.Code, f.Message, code)
	}
	return f
}

// structuredOf returns the structured content of a successful result.
func structuredOf(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected failure: %s", dump(res))
	}
	var m map[string]any
	if err := json.Unmarshal(mustJSON(res.StructuredContent), &m); err != nil {
		t.Fatalf("structured content: %v", err)
	}
	return m
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func dump(v any) string { return string(mustJSON(v)) }
