package cobra_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	cc "github.com/spf13/cobra"
	"go.uber.org/goleak"

	"github.com/reinsdev/reins/mcp"
	mcpcobra "github.com/reinsdev/reins/mcp/cobra"
	"github.com/reinsdev/reins/mcp/cobra/internal/testcli"
)

// testcliPath is the test CLI, built once for the package's tests.
var testcliPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "testcli")
	if err != nil {
		panic(err)
	}
	testcliPath = filepath.Join(dir, "testcli")
	out, err := exec.Command("go", "build", "-o", testcliPath, "./internal/testcli/cmd/testcli").CombinedOutput()
	if err != nil {
		panic("building testcli: " + err.Error() + "\n" + string(out))
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

type wireFailure struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// outcome decodes a tool result: the failure (nil on success) and the
// command diagnostics.
type outcome struct {
	Failure  *wireFailure `json:"failure"`
	Stdout   string       `json:"stdout"`
	Stderr   string       `json:"stderr"`
	ExitCode int          `json:"exitCode"`
	Trunc    bool         `json:"truncated"`
}

func decode(t *testing.T, res *sdk.CallToolResult) outcome {
	t.Helper()
	var o outcome
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	if res.IsError != (o.Failure != nil) {
		t.Fatalf("isError=%v but structured %s", res.IsError, raw)
	}
	return o
}

func wantCode(t *testing.T, res *sdk.CallToolResult, code mcp.Code) outcome {
	t.Helper()
	o := decode(t, res)
	if o.Failure == nil || o.Failure.Code != string(code) {
		t.Fatalf("want %s, got %s", code, dump(res))
	}
	if o.Failure.Retryable != (code == mcp.CodeBusy) {
		t.Fatalf("retryable = %v for %s", o.Failure.Retryable, code)
	}
	return o
}

func dump(v any) string { b, _ := json.Marshal(v); return string(b) }

// caller calls operations through call_tool or directly.
type caller struct {
	cs      *sdk.ClientSession
	compact bool
}

func (c caller) call(t *testing.T, ctx context.Context, op string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	p := &sdk.CallToolParams{Name: op, Arguments: args}
	if c.compact {
		p = &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": op, "arguments": args}}
	}
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("call %s: %v", op, err)
	}
	return res
}

// TestServeStdio runs `testcli mcp serve` as a real stdio MCP server and
// exercises the binding through call_tool.
func TestServeStdio(t *testing.T) {
	cmd := exec.Command(testcliPath, "mcp", "serve", "--log-level", "error")
	cmd.Env = append(os.Environ(), "TESTCLI_TIMEOUT=300ms", "TESTCLI_GRACE=100ms", "TESTCLI_CLEANUP=2s", "TESTCLI_OUTPUT_CAP=1000")
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	c := caller{cs, true}

	sr, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var found struct {
		Operations []struct{ Name, Group string }
	}
	_ = json.Unmarshal([]byte(dump(sr.StructuredContent)), &found)
	var names []string
	for _, o := range found.Operations {
		names = append(names, o.Name)
	}
	want := []string{"testcli_admin_users", "testcli_echo", "testcli_fail", "testcli_noisy", "testcli_peek", "testcli_sleep", "testcli_spawn", "testcli_stdin"}
	if !slices.Equal(names, want) {
		t.Errorf("operations = %v, want %v", names, want)
	}

	// Flags of several types, and positionals that look like flags.
	res := c.call(t, ctx, "testcli_echo", map[string]any{
		"flags": map[string]any{"times": 3, "tags": []string{"a", "b"}, "ratio": 0.25, "wait": "1m30s",
			"label": map[string]string{"k": "v"}, "verbose": true, "upper": false},
		"args": []string{"--config=evil.yaml", "-v", "--", "plain"},
	})
	o := decode(t, res)
	if o.Failure != nil || o.ExitCode != 0 {
		t.Fatalf("echo: %s", dump(res))
	}
	var echoed struct {
		Args    []string          `json:"args"`
		Times   int               `json:"times"`
		Tags    []string          `json:"tags"`
		Ratio   float64           `json:"ratio"`
		Wait    string            `json:"wait"`
		Label   map[string]string `json:"label"`
		Verbose bool              `json:"verbose"`
	}
	if err := json.Unmarshal([]byte(o.Stdout), &echoed); err != nil {
		t.Fatalf("echo stdout %q", o.Stdout)
	}
	if !slices.Equal(echoed.Args, []string{"--config=evil.yaml", "-v", "--", "plain"}) || echoed.Times != 3 ||
		!slices.Equal(echoed.Tags, []string{"a", "b"}) || echoed.Ratio != 0.25 || echoed.Wait != "1m30s" ||
		echoed.Label["k"] != "v" || !echoed.Verbose {
		t.Errorf("echo saw %+v", echoed)
	}

	// Injection and inexpressible values are refused before anything runs.
	for _, args := range []map[string]any{
		{"flags": map[string]any{"config": "evil.yaml"}},                        // unknown flag
		{"flags": map[string]any{"secret-token": "x"}},                          // hidden flag
		{"flags": map[string]any{"tags": []string{"a,b"}}},                      // splits on commas
		{"flags": map[string]any{"label": map[string]string{"a=b": "c"}}},       // key with '='
		{"flags": map[string]any{"times": 200}},                                 // int8 range
		{"flags": map[string]any{"times": 1.5}},                                 // not whole
		{"flags": map[string]any{"wait": "soon"}},                               // not a duration
		{"args": []any{"ok", 7}},                                                // not strings
		{"args": []string{"a\x00b"}},                                            // NUL
		{"flags": map[string]any{"times": json.RawMessage("9007199254740993")}}, // beyond 2^53
	} {
		wantCode(t, c.call(t, ctx, "testcli_echo", args), mcp.CodeInvalidArguments)
	}

	// A non-zero exit carries stdout, stderr and the exit code.
	o = wantCode(t, c.call(t, ctx, "testcli_fail", map[string]any{"flags": map[string]any{"code": 3}}), mcp.CodeCommandFailed)
	if o.ExitCode != 3 || !strings.Contains(o.Stderr, "boom") || !strings.Contains(o.Stdout, "some output") ||
		!strings.Contains(o.Failure.Message, "boom") {
		t.Errorf("fail: %+v", o)
	}
	// A command sleeping past the execution timeout.
	start := time.Now()
	wantCode(t, c.call(t, ctx, "testcli_sleep", map[string]any{"flags": map[string]any{"for": "30s"}}), mcp.CodeTimeout)
	if time.Since(start) > 10*time.Second {
		t.Errorf("timeout took %v", time.Since(start))
	}
	// Stdin is closed.
	o = decode(t, c.call(t, ctx, "testcli_stdin", nil))
	if strings.TrimSpace(o.Stdout) != "0 <nil>" {
		t.Errorf("stdin: %q", o.Stdout)
	}
	// Retained output is capped, head and tail.
	o = decode(t, c.call(t, ctx, "testcli_noisy", map[string]any{"flags": map[string]any{"bytes": 5000}}))
	if !o.Trunc || len(o.Stdout) > 1100 || !strings.Contains(o.Stdout, "omitted") {
		t.Errorf("noisy: truncated=%v len=%d", o.Trunc, len(o.Stdout))
	}
}

// TestMCPTools checks the exported catalogue of the test CLI: hidden,
// deprecated, omitted and group-only commands, help, completion and the
// mcp subtree are left out; annotations and hidden flags are honoured.
func TestMCPTools(t *testing.T) {
	out, err := exec.Command(testcliPath, "mcp", "tools").Output()
	if err != nil {
		t.Fatal(err)
	}
	var defs []mcp.Definition
	if err := json.Unmarshal(out, &defs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		if d.Name == "testcli_echo" && (!d.Annotations.ReadOnlyHint || d.Title != "Echo" || strings.Contains(string(d.InputSchema), "secret-token")) {
			t.Errorf("echo definition: %s", dump(d))
		}
	}
	want := []string{"testcli_admin_users", "testcli_echo", "testcli_fail", "testcli_noisy", "testcli_peek", "testcli_sleep", "testcli_spawn", "testcli_stdin"}
	if !slices.Equal(names, want) {
		t.Errorf("catalogue = %v, want %v", names, want)
	}
}

// served starts an in-process HTTP server in direct mode over a binding of
// the test CLI's tree.
func served(t *testing.T, opts mcpcobra.Options) (caller, *mcpcobra.Binding) {
	t.Helper()
	return servedTree(t, testcli.Root(), opts)
}

// servedTree is served for the tree of root.
func servedTree(t *testing.T, root *cc.Command, opts mcpcobra.Options) (caller, *mcpcobra.Binding) {
	t.Helper()
	if opts.Executable == "" {
		opts.Executable = testcliPath
	}
	b, err := mcpcobra.New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(mcp.Options{Mode: mcp.Direct})
	if err := srv.Add(b.Operations()...); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcp.HTTPOptions{}))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: ts.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return caller{cs, false}, b
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// TestGrandchildIsStopped: a command that leaves a grandchild ignoring
// SIGTERM behind; the cleanup kills it.
func TestGrandchildIsStopped(t *testing.T) {
	c, b := served(t, mcpcobra.Options{TermGrace: 100 * time.Millisecond, CleanupBudget: 5 * time.Second})
	ctx := context.Background()
	o := decode(t, c.call(t, ctx, "testcli_spawn", nil))
	if o.Failure != nil {
		t.Fatalf("spawn: %+v", o)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(o.Stdout))
	if err != nil {
		t.Fatalf("spawn stdout %q", o.Stdout)
	}
	if alive(pid) {
		t.Errorf("grandchild %d survived", pid)
	}
	if st := b.Status(); st.InUse != 0 || st.Degraded {
		t.Errorf("status %+v", st)
	}
	// The leader waits for its grandchild, both ignore SIGTERM: the
	// timeout stops the whole group with SIGKILL.
	c, _ = served(t, mcpcobra.Options{Timeout: 300 * time.Millisecond, TermGrace: 100 * time.Millisecond})
	wantCode(t, c.call(t, ctx, "testcli_spawn", map[string]any{"flags": map[string]any{"wait": true}}), mcp.CodeTimeout)
	c, _ = served(t, mcpcobra.Options{Timeout: 300 * time.Millisecond, TermGrace: 100 * time.Millisecond})
	wantCode(t, c.call(t, ctx, "testcli_sleep", map[string]any{"flags": map[string]any{"ignore-term": true}}), mcp.CodeTimeout)
}

// TestBusyAndShutdown: a second concurrent call finds the slot taken;
// Shutdown cancels the running call and refuses new ones.
func TestBusyAndShutdown(t *testing.T) {
	c, b := served(t, mcpcobra.Options{TermGrace: 100 * time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	var first *sdk.CallToolResult
	wg.Go(func() { first = c.call(t, ctx, "testcli_sleep", nil) })
	waitFor(t, func() bool { st := b.Status(); return len(st.Running) == 1 && st.Running[0].PID != 0 })
	wantCode(t, c.call(t, ctx, "testcli_fail", nil), mcp.CodeBusy)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	wg.Wait()
	wantCode(t, first, mcp.CodeCancelled)
	wantCode(t, c.call(t, ctx, "testcli_echo", nil), mcp.CodeUnavailable)
	if st := b.Status(); !st.ShuttingDown || st.InUse != 0 {
		t.Errorf("status %+v", st)
	}
}

// TestReadOnlyCallsRunInParallel: read-only commands run side by side,
// and beside a write that holds the only write slot; a fifth read beyond
// the read-only slots is busy.
func TestReadOnlyCallsRunInParallel(t *testing.T) {
	c, b := served(t, mcpcobra.Options{TermGrace: 100 * time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { c.call(t, ctx, "testcli_sleep", nil) })
	waitFor(t, func() bool { st := b.Status(); return len(st.Running) == 1 && st.Running[0].PID != 0 })
	results := make([]*sdk.CallToolResult, mcpcobra.DefaultReadOnlySlots)
	start := time.Now()
	var reads sync.WaitGroup
	for i := range results {
		reads.Go(func() {
			results[i] = c.call(t, ctx, "testcli_peek", map[string]any{"flags": map[string]any{"for": "2s"}})
		})
	}
	waitFor(t, func() bool { return len(b.Status().Running) == 1+len(results) })
	wantCode(t, c.call(t, ctx, "testcli_peek", nil), mcp.CodeBusy)
	reads.Wait()
	if d := time.Since(start); d > time.Duration(len(results))*2*time.Second-time.Second {
		t.Errorf("%d reads of 2 s took %v: they did not run in parallel", len(results), d)
	}
	for _, r := range results {
		if o := decode(t, r); o.Failure != nil || !strings.Contains(o.Stdout, "peeked") {
			t.Errorf("read: %s", dump(r))
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b.Shutdown(sctx)
	wg.Wait()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCleanupFailed: when the process group cannot be stopped (signals
// are swallowed, as for a descendant stuck in the kernel), the call fails
// with cleanup_failed and exit code -1, the slot stays taken and Status
// reports it, and Shutdown runs out of budget.
func TestCleanupFailed(t *testing.T) {
	opts := mcpcobra.Options{Timeout: 200 * time.Millisecond, TermGrace: 50 * time.Millisecond, CleanupBudget: 100 * time.Millisecond}
	var mu sync.Mutex
	var groups []int
	mcpcobra.SetSignal(&opts, func(pgid int, _ syscall.Signal) error {
		mu.Lock()
		groups = append(groups, pgid)
		mu.Unlock()
		return nil
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range groups {
			_ = syscall.Kill(-g, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond) // let the reaping goroutine see the exit
	})
	c, b := served(t, opts)
	ctx := context.Background()
	o := wantCode(t, c.call(t, ctx, "testcli_sleep", nil), mcp.CodeCleanupFailed)
	if o.ExitCode != -1 {
		t.Errorf("exit code %d, want -1", o.ExitCode)
	}
	st := b.Status()
	if !st.Degraded || st.InUse != 1 || len(st.Leaked) != 1 || st.LastCleanupError == "" {
		t.Fatalf("status %+v", st)
	}
	wantCode(t, c.call(t, ctx, "testcli_fail", nil), mcp.CodeBusy)
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	var f *mcp.Failure
	if err := b.Shutdown(sctx); !errors.As(err, &f) || f.Code() != mcp.CodeCleanupFailed {
		t.Fatalf("Shutdown = %v, want cleanup_failed", err)
	}
}

// TestStartFailure: a binary that cannot be started is unavailable.
func TestStartFailure(t *testing.T) {
	c, _ := served(t, mcpcobra.Options{Executable: filepath.Join(t.TempDir(), "missing")})
	wantCode(t, c.call(t, context.Background(), "testcli_echo", nil), mcp.CodeUnavailable)
}

// level is a custom flag type.
type level string

func (l *level) String() string     { return string(*l) }
func (l *level) Set(s string) error { *l = level(s); return nil }
func (l *level) Type() string       { return "level" }

// TestCustomFlagNeedsCodec: a custom flag type without a codec refuses to
// start, naming command, flag and type; with one it is published.
func TestCustomFlagNeedsCodec(t *testing.T) {
	root := &cc.Command{Use: "tool"}
	sub := &cc.Command{Use: "set", Run: func(*cc.Command, []string) {}}
	var l level
	sub.Flags().Var(&l, "level", "a level")
	root.AddCommand(sub)
	_, err := mcpcobra.New(root, mcpcobra.Options{Executable: testcliPath})
	if err == nil || !strings.Contains(err.Error(), "tool set") || !strings.Contains(err.Error(), "--level") || !strings.Contains(err.Error(), `"level"`) {
		t.Fatalf("New = %v", err)
	}
	b, err := mcpcobra.New(root, mcpcobra.Options{Executable: testcliPath, Codecs: map[string]mcpcobra.Codec{"level": {
		Schema: json.RawMessage(`{"type":"string","enum":["low","high"]}`),
		Encode: func(v json.RawMessage) ([]string, error) {
			var s string
			err := json.Unmarshal(v, &s)
			return []string{s}, err
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ops := b.Operations()
	if len(ops) != 1 || ops[0].Name != "tool_set" || !strings.Contains(string(ops[0].InputSchema), `"enum":["low","high"]`) {
		t.Fatalf("ops %s", dump(ops))
	}
}

// TestWithheldFlags: flags named in OmitFlags (here the root's persistent
// --verbose) or annotated with OmitAnnotation (echo's --ratio) are in no
// input schema, and a call passing one is invalid_arguments, never run
// with the flag dropped. A name in OmitFlags that no command has makes New
// fail.
func TestWithheldFlags(t *testing.T) {
	root := testcli.Root()
	echo, _, err := root.Find([]string{"echo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := echo.Flags().SetAnnotation("ratio", mcpcobra.OmitAnnotation, []string{"true"}); err != nil {
		t.Fatal(err)
	}
	c, b := servedTree(t, root, mcpcobra.Options{OmitFlags: []string{"verbose"}})
	for _, op := range b.Operations() {
		var schema struct {
			Properties struct {
				Flags struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"flags"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(op.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		flags := schema.Properties.Flags.Properties
		if _, ok := flags["verbose"]; ok {
			t.Errorf("%s publishes --verbose", op.Name)
		}
		if _, ok := flags["ratio"]; ok {
			t.Errorf("%s publishes --ratio", op.Name)
		}
		if _, ok := flags["times"]; op.Name == "testcli_echo" && !ok {
			t.Errorf("testcli_echo lost --times: %s", op.InputSchema)
		}
	}
	ctx := context.Background()
	for _, flag := range []string{"verbose", "ratio"} {
		o := wantCode(t, c.call(t, ctx, "testcli_echo", map[string]any{"flags": map[string]any{flag: true}}), mcp.CodeInvalidArguments)
		if !strings.Contains(o.Failure.Message, flag) {
			t.Errorf("--%s refused with %q, which does not name it", flag, o.Failure.Message)
		}
	}
	if o := decode(t, c.call(t, ctx, "testcli_echo", map[string]any{"flags": map[string]any{"times": 2}})); o.Failure != nil {
		t.Fatalf("echo with a published flag: %+v", o.Failure)
	}
	_, err = mcpcobra.New(testcli.Root(), mcpcobra.Options{Executable: testcliPath, OmitFlags: []string{"verbose", "vrebose"}})
	if err == nil || !strings.Contains(err.Error(), "--vrebose") {
		t.Fatalf("New with a misspelt OmitFlags name: %v", err)
	}
}
