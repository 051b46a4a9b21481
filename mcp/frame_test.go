package mcp_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStdioOversizedFrame speaks raw JSON-RPC to a real stdio server
// child: a frame over the 16 MiB ceiling gets a JSON-RPC error, and the
// connection keeps serving.
func TestStdioOversizedFrame(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REINS_MCP_TEST_SERVE=compact")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	r := bufio.NewReaderSize(stdout, 1<<20)
	send := func(s string) {
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	reply := func() map[string]any {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %.200s", err, line)
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := reply(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 17<<20) + `"}}`)
	m := reply()
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != -32600.0 || !strings.Contains(e["message"].(string), "wire ceiling") {
		t.Fatalf("oversized frame: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if m := reply(); m["id"] != 3.0 || m["result"] == nil {
		t.Fatalf("after the oversized frame: %v", m)
	}
}
