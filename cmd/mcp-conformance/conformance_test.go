package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wantScenarios is the number of server scenarios of the pinned suite
// (--suite all); wantChecks the number of checks they perform here.
const (
	wantScenarios = 32
	wantChecks    = 44
)

// TestConformance runs the official MCP conformance suite, pinned in
// suite/, against the fixture served on a loopback port. It installs the
// suite with npm ci when needed and fails when Node.js or npm is missing.
func TestConformance(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the conformance suite needs Node.js (>= 20) on PATH: %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("the conformance suite needs npm on PATH: %v", err)
	}
	suite, _ := filepath.Abs("suite")
	bin := filepath.Join(suite, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(bin); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = suite
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", suite, err, out)
		}
	}

	url := startFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, node, bin, "server",
		"--url", url,
		"--suite", "all",
		"--expected-failures", filepath.Join(suite, "baseline.yml"),
		"-o", out)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err = cmd.Run()
	summary := log.String()
	if i := bytes.Index(log.Bytes(), []byte("=== SUMMARY ===")); i >= 0 {
		summary = log.String()[i:]
	}
	if err != nil {
		t.Fatalf("conformance suite failed: %v\n%s", err, log.String())
	}
	scenarios := len(regexp.MustCompile(`(?m)^=== Running scenario: `).FindAllIndex(log.Bytes(), -1))
	m := regexp.MustCompile(`Total: (\d+) passed, (\d+) failed`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("no total in the suite's summary:\n%s", summary)
	}
	passed, _ := strconv.Atoi(m[1])
	failed, _ := strconv.Atoi(m[2])
	if scenarios != wantScenarios || passed != wantChecks || failed != 0 {
		t.Fatalf("ran %d scenarios (want %d), %d checks passed (want %d), %d failed\n%s",
			scenarios, wantScenarios, passed, wantChecks, failed, summary)
	}
	t.Logf("conformance: %d scenarios, %d checks passed, %d failed", scenarios, passed, failed)
}

// startFixture builds this command, starts it on a free loopback port as
// "mcp-conformance -addr 127.0.0.1:0" and returns its endpoint; the server
// is interrupted when the test ends.
func startFixture(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcp-conformance")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("fixture exited with %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("fixture did not stop on interrupt")
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "serving "); ok {
				select {
				case found <- u:
				default:
				}
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("the fixture did not report its address")
	}
	return ""
}
