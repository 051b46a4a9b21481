package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/vault"
)

// TestBackupRestoreRotateCommands: reins backup copies a running server's
// store; reins restore and reins master-key rotate refuse its data dir
// while it runs, restore says which key a new data dir needs, and both
// work on a data dir no server runs on.
func TestBackupRestoreRotateCommands(t *testing.T) {
	ctx := context.Background()
	s := startServer(t)
	file := filepath.Join(t.TempDir(), "reins.backup")
	r := execute(ctx, "", "backup", file, "--data-dir", s.dataDir)
	if r.err != nil || !strings.Contains(r.stdout, "backed up "+s.dataDir+" to "+file) || !strings.Contains(r.stderr, "the master key is not in the backup") {
		t.Fatalf("backup: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"restore", file, "--replace"}, {"master-key", "rotate"}} {
		r = execute(ctx, "", append(args, "--data-dir", s.dataDir)...)
		if r.err == nil || !strings.Contains(r.err.Error(), "in use by another reins serve") {
			t.Fatalf("%v on a running server's data dir: %v", args, r.err)
		}
	}

	dir := t.TempDir()
	r = execute(ctx, "", "restore", file, "--data-dir", dir)
	if r.err == nil || !strings.Contains(r.err.Error(), filepath.Join(dir, vault.KeyFile)) {
		t.Fatalf("restore without the key: %v", r.err)
	}
	key, err := os.ReadFile(filepath.Join(s.dataDir, vault.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, vault.KeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if r = execute(ctx, "", "restore", file, "--data-dir", dir); r.err != nil || !strings.Contains(r.stdout, "restored "+file) {
		t.Fatalf("restore: %v\n%s", r.err, r.stdout)
	}
	r = execute(ctx, "", "master-key", "rotate", "--data-dir", dir)
	if r.err != nil || !strings.Contains(r.stdout, "installed the new key in "+filepath.Join(dir, vault.KeyFile)) {
		t.Fatalf("rotate: %v\n%s", r.err, r.stdout)
	}

	t.Setenv(vault.EnvKey, strings.TrimSpace(string(key)))
	r = execute(ctx, "", "master-key", "rotate", "--data-dir", t.TempDir())
	if r.err == nil || !strings.Contains(r.err.Error(), "no reins database") {
		t.Fatalf("rotate without a database: %v", r.err)
	}
	r = execute(ctx, "", "master-key", "rotate", "--data-dir", dir)
	if r.err == nil || !strings.Contains(r.err.Error(), "REINS_NEW_MASTER_KEY") {
		t.Fatalf("rotate from REINS_MASTER_KEY without REINS_NEW_MASTER_KEY: %v", r.err)
	}
	r = execute(ctx, "", "master-key", "rotate", "--help")
	if r.err != nil || !strings.Contains(r.stdout, "REINS_NEW_MASTER_KEY") {
		t.Fatalf("rotate --help: %v\n%s", r.err, r.stdout)
	}
}
