package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/reinsdev/reins/mcp"
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

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(slog.New(slog.NewTextHandler(io.Discard, nil)))
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcp.HTTPOptions{Stateful: true, EventStore: sdk.NewMemoryEventStore(nil)}))
	hs := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
		hs.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, node, bin, "server",
		"--url", "http://"+ln.Addr().String()+"/mcp",
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
