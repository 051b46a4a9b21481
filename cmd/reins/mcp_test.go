package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	}
	if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
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
}

// buildReins builds the reins binary into a temporary directory.
func buildReins(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "reins")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
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
