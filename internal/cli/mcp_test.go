package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPToolsCatalogue: `reins mcp tools` publishes exactly the commands
// an agent should call: no server, executor, key minting, mcp subtree or
// command that never returns; reads are marked read-only, deletions
// destructive.
func TestMCPToolsCatalogue(t *testing.T) {
	r := execute(context.Background(), "", "mcp", "tools")
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	var defs []struct {
		Name        string
		Annotations struct {
			ReadOnlyHint    bool  `json:"readOnlyHint"`
			DestructiveHint *bool `json:"destructiveHint"`
		}
		InputSchema struct {
			Properties struct {
				Flags struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"flags"`
			} `json:"properties"`
		} `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	var names []string
	flags := map[string]bool{}
	for _, d := range defs {
		names = append(names, d.Name)
		for f := range d.InputSchema.Properties.Flags.Properties {
			flags[f] = true
		}
		readOnly := strings.HasSuffix(d.Name, "_list") || strings.HasSuffix(d.Name, "_get") || strings.HasSuffix(d.Name, "_versions") ||
			d.Name == "reins_version" || d.Name == "reins_sessions_events" || d.Name == "reins_environments_work"
		if d.Annotations.ReadOnlyHint != readOnly {
			t.Errorf("%s: readOnlyHint %v, want %v", d.Name, d.Annotations.ReadOnlyHint, readOnly)
		}
		destructive := d.Annotations.DestructiveHint == nil || *d.Annotations.DestructiveHint
		if want := strings.HasSuffix(d.Name, "_delete") || strings.HasSuffix(d.Name, "_archive"); !readOnly && destructive != want {
			t.Errorf("%s: destructiveHint %v, want %v", d.Name, destructive, want)
		}
	}
	slices.Sort(names)
	want := []string{
		"reins_agents_archive", "reins_agents_create", "reins_agents_get", "reins_agents_list", "reins_agents_update", "reins_agents_versions",
		"reins_environments_archive", "reins_environments_create", "reins_environments_delete", "reins_environments_get",
		"reins_environments_list", "reins_environments_update", "reins_environments_work",
		"reins_keys_list",
		"reins_sessions_archive", "reins_sessions_create", "reins_sessions_delete", "reins_sessions_events", "reins_sessions_get",
		"reins_sessions_list", "reins_sessions_run", "reins_sessions_send",
		"reins_vaults_credentials_list", "reins_vaults_get", "reins_vaults_list",
		"reins_version",
	}
	if !slices.Equal(names, want) {
		t.Errorf("published tools:\n%v\nwant:\n%v", names, want)
	}
	// Every flag a caller may set, so that a new one is published only
	// once someone has judged it: a connection setting, credential or
	// path belongs in mcpWithheldFlags.
	wantFlags := []string{"agent", "agent-version", "allowed-host", "approve", "auto-approve", "auto-deny", "custom-tool", "deny", "deny-message",
		"description", "environment", "include-archived", "interrupt", "is-error", "limit", "metadata", "model", "name", "networking", "order",
		"output", "page", "session", "status", "system", "title", "tool-response", "tool-result", "toolset", "type", "version"}
	if got := slices.Sorted(maps.Keys(flags)); !slices.Equal(got, wantFlags) {
		t.Errorf("published flags:\n%v\nwant:\n%v", got, wantFlags)
	}
}

// buildReins builds the reins binary into a temporary directory.
func buildReins(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "reins")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/reins").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestMCPServeOverHTTPRequiresToken: `reins mcp serve --http` answers 401
// to a request without its bearer token (given with --token, given in
// REINS_MCP_TOKEN, or generated and printed once), and serves the MCP
// client that sends it.
func TestMCPServeOverHTTPRequiresToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reins binary")
	}
	bin := buildReins(t)
	for _, how := range []string{"flag", "env", "generated"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.Command(bin, "mcp", "serve", "--direct", "--http", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), "REINS_MCP_TOKEN=")
			switch how {
			case "flag":
				cmd.Args = append(cmd.Args, "--token", "flag-token")
			case "env":
				cmd.Env = append(cmd.Env, "REINS_MCP_TOKEN=env-token")
			}
			url, token := startMCPHTTP(t, cmd)
			switch {
			case how == "flag" && token != "flag-token", how == "env" && token != "env-token", how == "generated" && len(token) < 32:
				t.Fatalf("token %q", token)
			}
			for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", token} {
				req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("Authorization %q: %d, want 401", auth, resp.StatusCode)
				}
			}
			ctx := context.Background()
			hc := &http.Client{Transport: bearerTransport{token}}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
				&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "reins_version", Arguments: map[string]any{"flags": map[string]any{}, "args": []any{}}})
			if err != nil || res.IsError {
				t.Fatalf("reins_version with the token: %v %+v", err, res)
			}
		})
	}
}

// startMCPHTTP starts cmd and returns the URL and the token it prints.
func startMCPHTTP(t *testing.T, cmd *exec.Cmd) (url, token string) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	token = tokenOf(cmd)
	for token == "" || url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("mcp serve ended (url %q, token %q)", url, token)
			}
			if rest, ok := strings.CutPrefix(l, "serving MCP at "); ok {
				url, _, _ = strings.Cut(rest, " ")
			}
			if strings.HasPrefix(l, "bearer token (generated") {
				token = l[strings.LastIndex(l, " ")+1:]
			}
		case <-time.After(30 * time.Second):
			t.Fatal("mcp serve printed no address")
		}
	}
	go func() {
		for range lines {
		}
	}()
	return url, token
}

// tokenOf is the token cmd was given (flag or environment), if any.
func tokenOf(cmd *exec.Cmd) string {
	if i := slices.Index(cmd.Args, "--token"); i >= 0 {
		return cmd.Args[i+1]
	}
	for _, e := range slices.Backward(cmd.Env) {
		if v, ok := strings.CutPrefix(e, "REINS_MCP_TOKEN="); ok {
			return v
		}
	}
	return ""
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPServeOverStdio runs the real binary as an MCP server and calls a
// command through the official go-sdk client.
func TestMCPServeOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reins binary")
	}
	bin := buildReins(t)
	ctx := context.Background()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: exec.Command(bin, "mcp", "serve", "--direct")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "reins_version", Arguments: map[string]any{"flags": map[string]any{}, "args": []any{}}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	json.NewEncoder(&out).Encode(res.StructuredContent)
	if res.IsError || !strings.Contains(out.String(), "reins") || !strings.Contains(out.String(), `"exitCode":0`) {
		t.Fatalf("reins_version over MCP: isError=%v %s", res.IsError, out.String())
	}
}

// TestMCPServeKeepsTheKey: the connection settings of `reins mcp serve`
// are fixed when it starts. A call_tool passing --url, --api-key,
// --data-dir, --database-url or --file, over stdio and over HTTP, is
// invalid_arguments and runs nothing: a server listening where the call
// points never sees a request, let alone the key; the same call without
// them reaches the server the environment names, with its key.
func TestMCPServeKeepsTheKey(t *testing.T) {
	srv := startServer(t)
	var attacked atomic.Int64
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attacked.Add(1)
		t.Errorf("the attacker's server got %s %s (Authorization %q, x-api-key %q)", r.Method, r.URL, r.Header.Get("Authorization"), r.Header.Get("x-api-key"))
	}))
	defer attacker.Close()
	otherDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(otherDir, "api-key"), []byte("sk-reins-other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := reinsEnv(t, reinsDir(t), "REINS_URL="+srv.url, "REINS_API_KEY="+srv.key, "REINS_MCP_TOKEN=mcp-token")
	attacks := []struct {
		op    string
		flags map[string]any
	}{
		{"reins_agents_list", map[string]any{"url": attacker.URL}},
		{"reins_sessions_list", map[string]any{"url": attacker.URL, "output": "json"}},
		{"reins_agents_list", map[string]any{"api-key": "sk-reins-chosen"}},
		{"reins_agents_list", map[string]any{"data-dir": otherDir}},
		{"reins_keys_list", map[string]any{"data-dir": otherDir}},
		{"reins_keys_list", map[string]any{"database-url": "postgres://" + strings.TrimPrefix(attacker.URL, "http://") + "/db"}},
		{"reins_agents_create", map[string]any{"file": filepath.Join(otherDir, "api-key")}},
		{"reins_sessions_send", map[string]any{"file": "/etc/passwd"}},
	}
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cs := connectMCP(t, ctx, env, mode)
			for _, a := range attacks {
				o := callTool(t, ctx, cs, a.op, map[string]any{"flags": a.flags})
				if o.Failure == nil || o.Failure.Code != "invalid_arguments" {
					t.Errorf("%s %v: %+v, want invalid_arguments", a.op, a.flags, o)
				}
			}
			// A flag in the positional arguments stays an argument.
			callTool(t, ctx, cs, "reins_agents_list", map[string]any{"args": []string{"--url=" + attacker.URL}})
			o := callTool(t, ctx, cs, "reins_agents_list", map[string]any{"flags": map[string]any{"output": "json"}})
			if o.Failure != nil || !strings.Contains(o.Stdout, srv.agentID) {
				t.Fatalf("agents list at the fixed server: %+v", o)
			}
		})
	}
	if n := attacked.Load(); n != 0 {
		t.Fatalf("the attacker's server got %d requests", n)
	}
}

// connectMCP starts `reins mcp serve` (compact) in env over mode (stdio
// or http) and connects the official client to it.
func connectMCP(t *testing.T, ctx context.Context, env []string, mode string) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cmd := exec.Command(lookPath(t, env, "reins"), "mcp", "serve")
	cmd.Env = env
	var transport sdk.Transport = &sdk.CommandTransport{Command: cmd}
	if mode == "http" {
		cmd.Args = append(cmd.Args, "--http", "127.0.0.1:0")
		url, token := startMCPHTTP(t, cmd)
		transport = &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}, DisableStandaloneSSE: true}
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolOutcome is a Cobra operation's result: its failure, or what the
// command printed.
type toolOutcome struct {
	Failure *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"failure"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exitCode"`
}

// callTool calls op with args through call_tool.
func callTool(t *testing.T, ctx context.Context, cs *sdk.ClientSession, op string, args map[string]any) toolOutcome {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": op, "arguments": args}})
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var o toolOutcome
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("%s: %s: %v", op, raw, err)
	}
	return o
}
