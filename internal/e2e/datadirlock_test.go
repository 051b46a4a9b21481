package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDataDirOwnedByOneServe: a second reins serve on a data dir in use
// exits at once naming the first's pid, instead of running the same
// sessions twice; once the first is killed (SIGKILL, no cleanup), a new
// one starts.
func TestDataDirOwnedByOneServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds reins and runs it as child processes")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	key := "sk-reins-lock-test-key"
	first := startChild(t, bin, dataDir, freeAddr(t), key)
	t.Cleanup(first.kill)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, bin, "serve", "--addr", freeAddr(t), "--data-dir", dataDir, "--log-level", "warn")
	second.Env = append(os.Environ(), "REINS_API_KEY="+key, "ANTHROPIC_API_KEY=")
	var stderr bytes.Buffer
	second.Stderr = &stderr
	second.WaitDelay = 2 * time.Second
	began := time.Now()
	err = second.Run()
	if ctx.Err() != nil {
		t.Fatalf("the second reins serve kept running on a data dir in use: %s", stderr.String())
	}
	if err == nil {
		t.Fatalf("the second reins serve exited 0: %s", stderr.String())
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the second reins serve took %v to give up", d)
	}
	want := fmt.Sprintf("data dir %s is in use by another reins serve (pid %d, started ", dataDir, first.cmd.Process.Pid)
	if msg := stderr.String(); !strings.Contains(msg, want) || !strings.Contains(msg, "stop it or use another --data-dir") {
		t.Fatalf("stderr %q, want %q", msg, want)
	}

	// The kernel drops the lock with the process: no stale lock.
	first.kill()
	third := startChild(t, bin, dataDir, freeAddr(t), key)
	third.kill()
}
