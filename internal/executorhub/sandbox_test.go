package executorhub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

// bashOn runs one bash command on a session of the fixture's executor.
func (f *fixture) bashOn(sessionID, command string) string {
	f.t.Helper()
	l := f.assign(sessionID, "bash")
	defer l.Release(context.Background())
	res, err := l.CallTool(context.Background(), tool.Call{ID: "c_" + sessionID, Name: "bash", Input: input(map[string]any{"command": command})})
	if err != nil {
		f.t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestBuiltinToolsSandboxedByDefault: a client made with nothing but a
// workspace runs bash in a sandbox: not as this process's user, without
// /etc/shadow, this process's environment or its /proc entry.
func TestBuiltinToolsSandboxedByDefault(t *testing.T) {
	t.Setenv("EXECUTOR_TEST_SECRET", "executor-test-secret-7")
	f := newFixture(t, HubOptions{})
	f.client(executor.Options{})
	out := f.bashOn("s1", fmt.Sprintf("id -u; cat /etc/shadow; cat /proc/%d/environ; env; pwd", os.Getpid()))
	if strings.Contains(out, "root:") || strings.Contains(out, "executor-test-secret-7") {
		t.Fatalf("the sandbox shows the host's secrets:\n%s", out)
	}
	if first, _, _ := strings.Cut(out, "\n"); first != "1000" {
		t.Fatalf("bash runs as %q, want the sandbox's user 1000:\n%s", first, out)
	}
	if !strings.Contains(out, "\n/workspace") {
		t.Fatalf("bash does not run in the sandbox's /workspace:\n%s", out)
	}
}

// TestBuiltinToolsUnconfinedOptOut: Unconfined runs bash on this host, as
// this process's user.
func TestBuiltinToolsUnconfinedOptOut(t *testing.T) {
	f := newFixture(t, HubOptions{})
	f.client(executor.Options{Sessions: &executor.BuiltinSessions{Dir: t.TempDir(), Unconfined: true}, Capabilities: executor.BuiltinCapabilities()})
	if out := strings.TrimSpace(f.bashOn("s1", "id -u")); out != strconv.Itoa(os.Geteuid()) {
		t.Fatalf("id -u = %q, want this process's %d", out, os.Geteuid())
	}
}

// TestSandboxUnavailableStopsTheClient: when the sandbox cannot be made,
// Run ends before it registers with an error that wraps
// ErrSandboxUnavailable and names the opt-out; it never runs the tools
// unconfined instead.
func TestSandboxUnavailableStopsTheClient(t *testing.T) {
	f := newFixture(t, HubOptions{})
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The sandboxes' state directory cannot be made under a file.
	sessions := func() *executor.BuiltinSessions {
		return &executor.BuiltinSessions{Dir: t.TempDir(), Sandbox: executor.SandboxOptions{StateDir: filepath.Join(file, "state")}}
	}
	c := executor.NewClient(executor.Options{URL: f.srv.URL, EnvironmentKey: f.envKey, Sessions: sessions(), Capabilities: executor.BuiltinCapabilities(), Logger: testLogger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := c.Run(ctx)
	if !errors.Is(err, executor.ErrSandboxUnavailable) || !strings.Contains(err.Error(), "BuiltinSessions.Unconfined") {
		t.Fatalf("Run = %v, want executor.ErrSandboxUnavailable naming BuiltinSessions.Unconfined", err)
	}
	if n := len(f.hub.Executors()); n != 0 {
		t.Fatalf("%d executors registered", n)
	}
	// Opened directly, a session is refused the same way.
	if _, err := sessions().OpenSession(context.Background(), executor.Assignment{SessionID: "s1"}); err == nil || !strings.Contains(err.Error(), "BuiltinSessions.Unconfined") {
		t.Fatalf("OpenSession = %v, want the sandbox's error", err)
	}
}
