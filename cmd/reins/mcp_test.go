package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPToolsCatalogue: `reins mcp tools` publishes reins's own commands,
// without the mcp subtree.
func TestMCPToolsCatalogue(t *testing.T) {
	r := execute(context.Background(), "", "mcp", "tools")
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	var defs []struct{ Name string }
	if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	names := map[string]bool{}
	for _, d := range defs {
		names[d.Name] = true
		if strings.HasPrefix(d.Name, "reins_mcp") {
			t.Errorf("the mcp subtree is published: %s", d.Name)
		}
	}
	for _, want := range []string{"reins_agents_list", "reins_sessions_run", "reins_version", "reins_keys_list"} {
		if !names[want] {
			t.Errorf("catalogue lacks %s (has %v)", want, names)
		}
	}
}

// TestMCPServeOverStdio runs the real binary as an MCP server and calls a
// command through the official go-sdk client.
func TestMCPServeOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reins binary")
	}
	bin := filepath.Join(t.TempDir(), "reins")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
