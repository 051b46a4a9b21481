package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/mcp"
)

func accept(content map[string]any) func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	return func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		return &sdk.ElicitResult{Action: "accept", Content: content}, nil
	}
}

func reply(action string) func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	return func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		return &sdk.ElicitResult{Action: action}, nil
	}
}

// connector opens a session on one transport and mode.
type connector struct {
	name    string
	compact bool
	open    func(t *testing.T, c clientConfig) *session
}

func connectors() []connector {
	var out []connector
	for _, compact := range []bool{true, false} {
		mode := "direct"
		if compact {
			mode = "compact"
		}
		out = append(out, connector{name: "stdio/" + mode, compact: compact, open: func(t *testing.T, c clientConfig) *session {
			c.mode = mode
			return stdioSession(t, c)
		}})
		out = append(out, connector{name: "http/" + mode, compact: compact, open: func(t *testing.T, c clientConfig) *session {
			opts := fixtureOptions()
			opts.Logger = quietLogger()
			if !compact {
				opts.Mode = mcp.Direct
			}
			url := httpServer(t, newFixture(opts, nil), true)
			s, _ := httpSession(t, url, c)
			return s
		}})
	}
	return out
}

// TestFailureCodes provokes each operation failure code that needs no
// cooperation from the test through a real client, on stdio and HTTP, in
// compact and direct mode.
func TestFailureCodes(t *testing.T) {
	for _, cn := range connectors() {
		t.Run(cn.name, func(t *testing.T) {
			t.Parallel()
			s := cn.open(t, clientConfig{elicit: accept(map[string]any{"reason": "tidy"})})
			c := cn.compact

			if got := structuredOf(t, s.call(c, "echo", map[string]any{"text": "hi"})); got["text"] != "hi" {
				t.Errorf("echo = %v", got)
			}
			// unavailable: unknown and denied answer identically, modulo the name.
			unknown := wantFailure(t, s.call(c, "nope_op", map[string]any{}), mcp.CodeUnavailable)
			denied := wantFailure(t, s.call(c, "secret_op", map[string]any{}), mcp.CodeUnavailable)
			if strings.ReplaceAll(unknown.Message, "nope_op", "X") != strings.ReplaceAll(denied.Message, "secret_op", "X") {
				t.Errorf("unknown %q and denied %q differ", unknown.Message, denied.Message)
			}
			// invalid_arguments: schema, argument budget, numeric profile.
			for _, args := range []any{
				map[string]any{"a": "one", "b": 2},                             // schema: type
				map[string]any{"a": 1},                                         // schema: required
				map[string]any{"a": 101, "b": 1},                               // schema: out of range
				json.RawMessage(`{"a":1,"b":9007199254740993}`),                // beyond 2^53
				json.RawMessage(`{"a":1,"b":-9007199254740993}`),               // beyond -2^53
				json.RawMessage(`{"a":1,"b":1e999}`),                           // not finite
				map[string]any{"a": 1, "b": 2, "c": strings.Repeat("x", 5000)}, // string budget
			} {
				f := wantFailure(t, s.call(c, "add", args), mcp.CodeInvalidArguments)
				if f.Message == "" {
					t.Errorf("empty message for %v", args)
				}
			}
			many := map[string]any{}
			for i := range 100 {
				many[strings.Repeat("k", i+1)] = i
			}
			wantFailure(t, s.call(c, "add", many), mcp.CodeInvalidArguments) // entries budget
			// Failures a handler raises pass through; the cause stays private.
			wantFailure(t, s.call(c, "fail", map[string]any{"code": "busy"}), mcp.CodeBusy)
			wantFailure(t, s.call(c, "fail", map[string]any{"code": "read_failed"}), mcp.CodeReadFailed)
			wantFailure(t, s.call(c, "fail", map[string]any{"code": "command_failed"}), mcp.CodeCommandFailed)
			// internal: NewFailure with an invalid code, a plain error, a panic.
			wantFailure(t, s.call(c, "fail", map[string]any{"code": "no_such_code"}), mcp.CodeInternal)
			wantFailure(t, s.call(c, "plain_error", map[string]any{}), mcp.CodeInternal)
			wantFailure(t, s.call(c, "panic", map[string]any{}), mcp.CodeInternal)
			// invalid_result.
			wantFailure(t, s.call(c, "no_outcome", map[string]any{}), mcp.CodeInvalidResult)
			wantFailure(t, s.call(c, "unconstructed", map[string]any{}), mcp.CodeInvalidResult)
			wantFailure(t, s.call(c, "bad_output", map[string]any{}), mcp.CodeInvalidResult)
			wantFailure(t, s.call(c, "view", map[string]any{"uri": "ui://fixture/rogue"}), mcp.CodeInvalidResult)
			if res := s.call(c, "view", map[string]any{"uri": "ui://fixture/approved"}); res.IsError {
				t.Errorf("approved view failed: %s", dump(res))
			}
			// result_too_large: the fixture's result budget is 64 KiB.
			wantFailure(t, s.call(c, "big", map[string]any{"bytes": 70 << 10}), mcp.CodeResultTooLarge)
			// timeout: the operation's own timeout.
			wantFailure(t, s.call(c, "slow", map[string]any{}), mcp.CodeTimeout)
			// A confirmation chain across a prompt, then declined and cancelled.
			got := structuredOf(t, s.call(c, "confirm", map[string]any{"target": "t1"}))
			if ans, _ := got["answer"].(map[string]any); ans["reason"] != "tidy" {
				t.Errorf("confirm = %v", got)
			}
		})
	}
}

// TestInteractions covers the user's answers and the prompt limit on
// stateful sessions with inline elicitation and with multi round-trip.
func TestInteractions(t *testing.T) {
	for _, cn := range connectors() {
		for _, version := range []string{"2025-11-25", ""} {
			if version == "" && strings.HasPrefix(cn.name, "http") {
				continue // covered by the continuation tests
			}
			t.Run(cn.name+"/"+version, func(t *testing.T) {
				t.Parallel()
				c := cn.compact
				s := cn.open(t, clientConfig{elicit: reply("decline"), version: version})
				wantFailure(t, s.call(c, "confirm", map[string]any{"target": "x"}), mcp.CodeInteractionDeclined)
				s = cn.open(t, clientConfig{elicit: reply("cancel"), version: version})
				wantFailure(t, s.call(c, "confirm", map[string]any{"target": "x"}), mcp.CodeInteractionCancelled)
				// A client that declared no elicitation support.
				s = cn.open(t, clientConfig{version: version})
				wantFailure(t, s.call(c, "confirm", map[string]any{"target": "x"}), mcp.CodeConfirmationRequired)
				// Form only: URL mode is not supported.
				s = cn.open(t, clientConfig{elicit: accept(nil), version: version})
				wantFailure(t, s.call(c, "visit", map[string]any{}), mcp.CodeConfirmationRequired)
				// Both modes.
				s = cn.open(t, clientConfig{elicit: accept(nil), version: version, caps: &sdk.ClientCapabilities{
					Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}}}})
				if res := s.call(c, "visit", map[string]any{}); res.IsError {
					t.Errorf("visit: %s", dump(res))
				}
				if version != "" {
					// Ten prompts are fine; the eleventh hits the limit.
					if got := structuredOf(t, s.call(c, "ask_many", map[string]any{"n": 10})); got["asked"] != 10.0 {
						t.Errorf("ask_many 10 = %v", got)
					}
					wantFailure(t, s.call(c, "ask_many", map[string]any{"n": 11}), mcp.CodeInteractionLimit)
				}
			})
		}
	}
}

func TestCompactCatalogue(t *testing.T) {
	s := stdioSession(t, clientConfig{mode: "compact"})
	ctx := context.Background()
	lt, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
		if tl.Name == "call_tool" {
			a := tl.Annotations
			if a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
				t.Errorf("call_tool annotations not conservative: %+v", a)
			}
		}
		if tl.OutputSchema == nil || !strings.Contains(dump(tl.OutputSchema), `"object"`) {
			t.Errorf("%s: output schema %s", tl.Name, dump(tl.OutputSchema))
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"call_tool", "get_tool_details", "search_tools"}) {
		t.Fatalf("tools = %v", names)
	}
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{"group": "text"}})
	if err != nil {
		t.Fatal(err)
	}
	got := dump(structuredOf(t, res))
	if !strings.Contains(got, `"echo"`) || strings.Contains(got, "secret_op") || strings.Contains(got, `"add"`) {
		t.Errorf("search group=text: %s", got)
	}
	res, _ = s.CallTool(ctx, &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "INTEGERS"}})
	if got := dump(structuredOf(t, res)); !strings.Contains(got, `"add"`) || strings.Contains(got, `"echo"`) {
		t.Errorf("search query: %s", got)
	}
	res, _ = s.CallTool(ctx, &sdk.CallToolParams{Name: "get_tool_details", Arguments: map[string]any{"name": "echo"}})
	d := structuredOf(t, res)
	if d["inputSchema"] == nil || d["annotations"].(map[string]any)["readOnlyHint"] != true {
		t.Errorf("details: %v", d)
	}
	res, _ = s.CallTool(ctx, &sdk.CallToolParams{Name: "get_tool_details", Arguments: map[string]any{"name": "secret_op"}})
	wantFailure(t, res, mcp.CodeUnavailable)
	// Protocol errors: unknown outer tool and malformed envelopes.
	if _, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Error("unknown outer tool: no JSON-RPC error")
	}
	if _, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"nme": "echo"}}); err == nil {
		t.Error("malformed call_tool envelope: no JSON-RPC error")
	}
	if _, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": 7}}); err == nil {
		t.Error("call_tool with a numeric name: no JSON-RPC error")
	}
}

func TestDirectCatalogue(t *testing.T) {
	for _, caller := range []string{"tester", "admin"} {
		s := stdioSession(t, clientConfig{mode: "direct", caller: caller})
		lt, err := s.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		has := slices.ContainsFunc(lt.Tools, func(tl *sdk.Tool) bool { return tl.Name == "secret_op" })
		if has != (caller == "admin") {
			t.Errorf("caller %s sees secret_op = %v", caller, has)
		}
		d := slices.IndexFunc(lt.Tools, func(tl *sdk.Tool) bool { return tl.Name == "dashboard" })
		if d < 0 || !strings.Contains(dump(lt.Tools[d].Meta), `"resourceUri":"ui://fixture/approved"`) {
			t.Errorf("dashboard tool meta: %v", dump(lt.Tools))
		}
		if res := s.call(false, "dashboard", map[string]any{}); res.IsError || !strings.Contains(dump(res.Meta), "ui://fixture/approved") {
			t.Errorf("dashboard result: %s", dump(res))
		}
		i := slices.IndexFunc(lt.Tools, func(tl *sdk.Tool) bool { return tl.Name == "echo" })
		if i < 0 || !lt.Tools[i].Annotations.ReadOnlyHint || lt.Tools[i].Title != "Echo" {
			t.Fatalf("echo tool: %+v", lt.Tools)
		}
		if caller == "admin" {
			if res := s.call(false, "secret_op", map[string]any{}); res.IsError {
				t.Errorf("admin denied: %s", dump(res))
			}
		}
	}
}

func TestNewFailure(t *testing.T) {
	for _, tc := range []struct {
		code mcp.Code
		msg  string
		want mcp.Code
	}{
		{mcp.CodeBusy, "try later", mcp.CodeBusy},
		{"bogus", "x", mcp.CodeInternal},
		{mcp.CodeTimeout, "", mcp.CodeInternal},
		{mcp.CodeTimeout, "\xff", mcp.CodeInternal},
		{mcp.CodeTimeout, strings.Repeat("m", 2000), mcp.CodeInternal},
	} {
		f := mcp.NewFailure(tc.code, tc.msg, nil)
		if f.Code() != tc.want {
			t.Errorf("NewFailure(%q, %q) = %s", tc.code, tc.msg, f.Code())
		}
	}
	for _, c := range []mcp.Code{mcp.CodeUnavailable, mcp.CodeInvalidArguments, mcp.CodeBusy, mcp.CodeTimeout,
		mcp.CodeCancelled, mcp.CodeConfirmationRequired, mcp.CodeInteractionDeclined, mcp.CodeInteractionCancelled,
		mcp.CodeInteractionLimit, mcp.CodeContinuationInvalid, mcp.CodeContinuationStale, mcp.CodeInvalidResult,
		mcp.CodeResultTooLarge, mcp.CodeCommandFailed, mcp.CodeCleanupFailed, mcp.CodeReadFailed, mcp.CodeInternal} {
		if c.Retryable() != (c == mcp.CodeBusy || c == mcp.CodeReadFailed) {
			t.Errorf("%s retryable = %v", c, c.Retryable())
		}
	}
}

func TestAddRejectsBadDefinitions(t *testing.T) {
	srv := mcp.NewServer(mcp.Options{Logger: quietLogger()})
	h := func(context.Context, *mcp.Call) (*mcp.Result, error) { return mcp.TextResult(""), nil }
	for _, op := range []mcp.Operation{
		{Name: "bad name!", Handler: h},
		{Name: "nohandler"},
		{Name: "badschema", Handler: h, InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"nonsense"}}}`)},
		{Name: "notobject", Handler: h, InputSchema: json.RawMessage(`{"type":"string"}`)},
		{Name: "remote", Handler: h, InputSchema: json.RawMessage(`{"type":"object","$ref":"https://example.com/s.json"}`)},
		{Name: "badout", Handler: h, OutputSchema: json.RawMessage(`{"minimum":"x"}`)},
		{Name: "badview", Handler: h, View: "ui://nowhere"},
	} {
		err := srv.Add(op)
		var f *mcp.Failure
		if !errorsAs(err, &f) || f.Code() != mcp.CodeInvalidResult {
			t.Errorf("Add(%s) = %v, want invalid_result", op.Name, err)
		}
	}
}
