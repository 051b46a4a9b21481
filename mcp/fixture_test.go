package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/reinsdev/reins/mcp"
)

// The test binary doubles as a stdio server: with REINS_MCP_TEST_SERVE set
// to "compact" or "direct" it serves the fixture on stdin/stdout.
func TestMain(m *testing.M) {
	if mode := os.Getenv("REINS_MCP_TEST_SERVE"); mode != "" {
		opts := fixtureOptions()
		if mode == "direct" {
			opts.Mode = mcp.Direct
		}
		srv := newFixture(opts, nil)
		if err := srv.ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// secret is a private cause that must never reach the wire.
const secret = "s3cr3t-cause"

func fixtureOptions() mcp.Options {
	return mcp.Options{
		Name: "fixture",
		Identify: func(_ context.Context, extra *sdk.RequestExtra) string {
			if extra != nil && extra.Header != nil && extra.Header.Get("X-Caller") != "" {
				return extra.Header.Get("X-Caller")
			}
			if c := os.Getenv("REINS_MCP_TEST_CALLER"); c != "" {
				return c
			}
			return "tester"
		},
		Allow: func(_ context.Context, caller, op string) bool {
			return !(op == "secret_op" && caller != "admin")
		},
		Arguments:    mcp.ArgumentLimits{MaxString: 4096, MaxEntries: 64},
		ResultBudget: 64 << 10,
		Views:        []mcp.View{{URI: "ui://fixture/approved", Name: "approved", HTML: "<p>ok</p>"}},
		Resources: []mcp.Resource{
			{URI: "test://bundle", Name: "bundle", Budget: 10, Read: func(context.Context, string) ([]mcp.Item, error) {
				return []mcp.Item{
					{URI: "test://bundle/a", MIMEType: "text/plain", Text: "hello"},
					{URI: "test://bundle/b", Err: errors.New(secret)},
					{URI: "test://bundle/c", Err: os.ErrNotExist},
					{URI: "test://bundle/d", Err: context.DeadlineExceeded},
					{URI: "test://bundle/e", MIMEType: "text/plain", Text: "\xff\xfe"},
					{URI: "test://bundle/f", MIMEType: "text/plain", Text: "too long for the rest"},
				}, nil
			}},
			{URI: "test://broken", Name: "broken", Read: func(context.Context, string) ([]mcp.Item, error) {
				return nil, errors.New(secret)
			}},
		},
	}
}

// hooks let in-process tests observe and steer blocking handlers.
type hooks struct {
	started chan string
	release chan struct{}
}

func obj(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

func newFixture(opts mcp.Options, h *hooks) *mcp.Server {
	srv := mcp.NewServer(opts)
	ro := mcp.Annotations{ReadOnly: true, Idempotent: true}
	err := srv.Add(
		mcp.Operation{Name: "echo", Group: "text", Title: "Echo", Description: "Returns its text.",
			Annotations:  ro,
			InputSchema:  obj(`"text":{"type":"string"}`, "text"),
			OutputSchema: obj(`"text":{"type":"string"}`, "text"),
			Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ Text string }
				_ = json.Unmarshal(c.Arguments, &in)
				return mcp.StructuredResult(map[string]string{"text": in.Text}), nil
			}},
		mcp.Operation{Name: "add", Group: "math", Description: "Adds two integers.",
			InputSchema: obj(`"a":{"type":"integer","minimum":-100,"maximum":100},"b":{"type":"integer"}`, "a", "b"),
			Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ A, B int64 }
				_ = json.Unmarshal(c.Arguments, &in)
				return mcp.StructuredResult(map[string]int64{"sum": in.A + in.B}), nil
			}},
		mcp.Operation{Name: "secret_op", Group: "text", Description: "Only for admins.",
			Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) { return mcp.TextResult("classified"), nil }},
		mcp.Operation{Name: "fail", Description: "Fails with the given code.",
			InputSchema: obj(`"code":{"type":"string"}`, "code"),
			Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ Code string }
				_ = json.Unmarshal(c.Arguments, &in)
				return nil, mcp.NewFailure(mcp.Code(in.Code), "failed on purpose", errors.New(secret))
			}},
		mcp.Operation{Name: "plain_error", Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) {
			return nil, errors.New(secret)
		}},
		mcp.Operation{Name: "panic", Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) { panic(secret) }},
		mcp.Operation{Name: "no_outcome", Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) { return nil, nil }},
		mcp.Operation{Name: "unconstructed", Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) { return &mcp.Result{}, nil }},
		mcp.Operation{Name: "bad_output", OutputSchema: obj(`"n":{"type":"integer"}`, "n"),
			Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) {
				return mcp.StructuredResult(map[string]string{"n": "not a number"}), nil
			}},
		mcp.Operation{Name: "view", InputSchema: obj(`"uri":{"type":"string"}`, "uri"),
			Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ URI string }
				_ = json.Unmarshal(c.Arguments, &in)
				return mcp.TextResult("see the view").WithView(in.URI), nil
			}},
		mcp.Operation{Name: "dashboard", View: "ui://fixture/approved",
			Handler: func(context.Context, *mcp.Call) (*mcp.Result, error) { return mcp.TextResult("rendered"), nil }},
		mcp.Operation{Name: "big", InputSchema: obj(`"bytes":{"type":"integer"}`, "bytes"),
			Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ Bytes int }
				_ = json.Unmarshal(c.Arguments, &in)
				return mcp.TextResult(strings.Repeat("x", in.Bytes)), nil
			}},
		mcp.Operation{Name: "slow", Timeout: 50 * time.Millisecond,
			Handler: func(ctx context.Context, _ *mcp.Call) (*mcp.Result, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}},
		mcp.Operation{Name: "block", Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			if h == nil {
				return nil, errors.New("no hooks")
			}
			h.started <- c.Operation
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-h.release:
				return mcp.TextResult("released"), nil
			}
		}},
		mcp.Operation{Name: "stubborn", Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			h.started <- c.Operation
			<-h.release // ignores cancellation
			return mcp.TextResult("late"), nil
		}},
		mcp.Operation{Name: "confirm", Annotations: mcp.Annotations{Destructive: ptr(true)},
			InputSchema: obj(`"target":{"type":"string"}`, "target"),
			Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
				a, err := c.Ask(ctx, mcp.Prompt{Message: "Delete the target?",
					Schema: map[string]any{"type": "object", "properties": map[string]any{"reason": map[string]any{"type": "string"}}}})
				if err != nil {
					return nil, err
				}
				if h != nil && h.release != nil && c.Caller == "blocker" {
					h.started <- "confirm"
					<-h.release
				}
				return mcp.StructuredResult(map[string]any{"deleted": true, "answer": a.Content}), nil
			}},
		mcp.Operation{Name: "visit", Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			if _, err := c.Ask(ctx, mcp.Prompt{Mode: mcp.URLMode, Message: "Sign in", URL: "https://example.test/consent"}); err != nil {
				return nil, err
			}
			return mcp.TextResult("visited"), nil
		}},
		mcp.Operation{Name: "ignore_prompt", Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
			_, _ = c.Ask(ctx, mcp.Prompt{Message: "ignored"})
			return mcp.TextResult("carried on"), nil
		}},
		mcp.Operation{Name: "ask_many", InputSchema: obj(`"n":{"type":"integer"}`, "n"),
			Handler: func(ctx context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ N int }
				_ = json.Unmarshal(c.Arguments, &in)
				for i := range in.N {
					if _, err := c.Ask(ctx, mcp.Prompt{Message: fmt.Sprintf("question %d", i+1)}); err != nil {
						return nil, err
					}
				}
				return mcp.StructuredResult(map[string]int{"asked": in.N}), nil
			}},
	)
	if err != nil {
		panic(err)
	}
	return srv
}

func ptr[T any](v T) *T { return &v }

// quietLogger discards logs; logs are checked where they matter.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// headerTransport adds a caller header to every request.
type headerTransport struct {
	mu     sync.Mutex // guards caller
	caller string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	t.mu.Lock()
	if t.caller != "" {
		r.Header.Set("X-Caller", t.caller)
	}
	t.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (t *headerTransport) set(caller string) {
	t.mu.Lock()
	t.caller = caller
	t.mu.Unlock()
}
