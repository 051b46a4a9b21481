package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
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
	envID, key := s.selfHosted(t, "readme hands")
	cmd := exec.Command(bin)
	cmd.Dir = t.TempDir()
	s.startExecutor(t, cmd, key, "executor-own-secret-0006")

	got := s.bash(t, s.session(t, envID), fmt.Sprintf(
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
	runProbes(t, s, envID, map[string]probe{
		"server secrets":     probeServerSecrets,
		"etc shadow":         probeEtcShadow,
		"internal addresses": probeInternalAddresses,
		"loopback":           probeLoopback,
	})
	if cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("the README's executor exited")
	}
}
