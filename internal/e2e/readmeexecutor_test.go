package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

// readmeGoExecutor returns the README's Go executor example, the block
// marked "readme-test: go executor".
func readmeGoExecutor(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- readme-test: go executor -->\\n```go\\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no Go executor block marked <!-- readme-test: go executor -->")
	}
	return string(m[1])
}

// TestREADMEGoExecutorIsSandboxed builds the README's Go executor example
// as written and runs it, in a directory of its own, as the executor of a
// self-hosted environment of a real `reins serve` that has secrets in its
// environment. A model's bash then tries to read /etc/shadow, the server's
// environment and the executor's own, and to reach internal addresses:
// every attempt is refused, and the command runs as the sandbox's
// unprivileged user, not as the executor's (root here).
func TestREADMEGoExecutorIsSandboxed(t *testing.T) {
	src := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(src, []byte(readmeGoExecutor(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startEscapeServer(t)
	bin, err := buildBinary(src, "readme-go-executor")
	if err != nil {
		t.Fatal(err)
	}
	var env ma.Environment
	if _, err := call(s.url, s.key, "POST", "/v1/environments", map[string]any{"name": "readme hands", "config": map[string]any{"type": "self_hosted"}}, &env); err != nil {
		t.Fatal(err)
	}
	var key struct{ Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env.ID+"/keys", nil, &key); err != nil {
		t.Fatal(err)
	}
	s.extra = []string{key.Key, "executor-own-secret-0006"}
	cmd := exec.Command(bin)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "REINS_URL="+s.url, "REINS_ENVIRONMENT_KEY="+key.Key, "EXECUTOR_SECRET=executor-own-secret-0006")
	var buf bytes.Buffer
	out := &lockedWriter{w: &buf}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the README's executor:\n%s", buf.String())
		}
	}()

	got := s.bash(t, s.session(t, env.ID), fmt.Sprintf(
		"cat /etc/shadow; id -u; cat /proc/%d/environ; cat /proc/%d/environ; cat /proc/1/environ; env",
		s.cmd.Process.Pid, cmd.Process.Pid))
	if strings.Contains(got, "root:") {
		t.Errorf("/etc/shadow is readable:\n%s", got)
	}
	if l := leaks(got, s.extra...); l != "" {
		t.Errorf("%s:\n%s", l, got)
	}
	if uid := regexp.MustCompile(`(?m)^\d+$`).FindString(got); uid != "1000" {
		t.Errorf("id -u printed %q, want the sandbox's user 1000:\n%s", uid, got)
	}
	probes := map[string]probe{
		"server secrets":     probeServerSecrets,
		"etc shadow":         probeEtcShadow,
		"internal addresses": probeInternalAddresses,
		"loopback":           probeLoopback,
	}
	for name, p := range probes {
		t.Run(name, func(t *testing.T) {
			if escaped := p(t, s, env.ID); escaped != "" {
				t.Error(escaped)
			}
		})
	}
	if cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("the README's executor exited")
	}
}
