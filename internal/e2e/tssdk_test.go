package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTypeScriptSDK drives reins with the official Anthropic TypeScript
// SDK (pinned in tssdk/package-lock.json) on the machine's Node.js.
func TestTypeScriptSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm and node")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("Node.js is required for this test (the machine's node; .ci/run installs it when missing)")
	}
	dir, _ := filepath.Abs("tssdk")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@anthropic-ai", "sdk")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	s := start(t, options{})
	cmd := exec.Command(node, "session.mjs", s.url, s.key)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("node session.mjs: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
