package e2e

import (
	"encoding/json"
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
	if !sdkInstalled(dir) {
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

// sdkInstalled reports whether dir/node_modules holds the SDK version that
// dir/package-lock.json pins (a checkout that had an older one installs
// anew).
func sdkInstalled(dir string) bool {
	var lock struct {
		Packages map[string]struct{ Version string }
	}
	var pkg struct{ Version string }
	data, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil || json.Unmarshal(data, &lock) != nil {
		return false
	}
	data, err = os.ReadFile(filepath.Join(dir, "node_modules", "@anthropic-ai", "sdk", "package.json"))
	if err != nil || json.Unmarshal(data, &pkg) != nil {
		return false
	}
	want := lock.Packages["node_modules/@anthropic-ai/sdk"].Version
	return want != "" && pkg.Version == want
}
