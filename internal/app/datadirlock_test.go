package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/toolhost"
)

// TestDataDirLock: one App owns a data dir at a time; a second New on it
// fails at once naming the holder, and succeeds after the first's
// Shutdown.
func TestDataDirLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Sandbox: toolhost.SandboxConfig{Mode: toolhost.SandboxNone}}
	first, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	shutdown := func(a *App) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := a.Shutdown(sctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}

	start := time.Now()
	second, err := New(ctx, cfg)
	if err == nil {
		shutdown(second)
		shutdown(first)
		t.Fatal("a second App opened a data dir in use")
	}
	if !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("error %v is not ErrDataDirInUse", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("New waited %v for the lock", d)
	}
	want := fmt.Sprintf("data dir %s is in use by another reins serve (pid %d, started ", dir, os.Getpid())
	if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "); stop it or use another --data-dir") {
		t.Fatalf("error %q, want it to start with %q", msg, want)
	}

	shutdown(first)
	third, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New after the holder's Shutdown: %v", err)
	}
	shutdown(third)
}
