package cli

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestKeysCommands creates, lists and revokes keys in a data dir, and the
// server refuses a revoked key.
func TestKeysCommands(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	r := execute(ctx, "", "keys", "create", "--name", "ci", "--data-dir", s.dataDir)
	if r.err != nil {
		t.Fatalf("%v %s", r.err, r.stderr)
	}
	key := strings.TrimSpace(r.stdout)
	id := regexp.MustCompile(`key_\w+`).FindString(r.stderr)
	if !strings.HasPrefix(key, "sk-reins-") || id == "" {
		t.Fatalf("create printed %q / %q", r.stdout, r.stderr)
	}
	if ok := execute(ctx, "", "agents", "list", "--url", s.url, "--api-key", key); ok.err != nil {
		t.Fatalf("new key refused: %v", ok.err)
	}
	r = execute(ctx, "", "keys", "list", "--data-dir", s.dataDir)
	if r.err != nil || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "…"+key[len(key)-4:]) || strings.Contains(r.stdout, key) {
		t.Fatalf("list: %v\n%s", r.err, r.stdout)
	}
	if r = execute(ctx, "", "keys", "revoke", id, "--data-dir", s.dataDir); r.err != nil {
		t.Fatal(r.err)
	}
	r = execute(ctx, "", "keys", "list", "--data-dir", s.dataDir)
	if !strings.Contains(r.stdout, "revoked") {
		t.Fatalf("list after revoke:\n%s", r.stdout)
	}
}

// TestKeysRefuseMissingDatabase: keys commands on a directory without a
// reins database refuse, naming the flag, and create nothing; revoking a
// missing key says so.
func TestKeysRefuseMissingDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, args := range [][]string{{"keys", "create"}, {"keys", "list"}, {"keys", "revoke", "key_x"}} {
		r := execute(ctx, "", append(args, "--data-dir", dir)...)
		if r.err == nil || !strings.Contains(r.err.Error(), "no reins database") || !strings.Contains(r.err.Error(), "--data-dir") {
			t.Errorf("%v: %v", args, r.err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused commands left %d files in %s", len(entries), dir)
	}
	s := startServer(t)
	r := execute(ctx, "", "keys", "revoke", "key_missing", "--data-dir", s.dataDir)
	if r.err == nil || !strings.Contains(r.err.Error(), "no API key key_missing") {
		t.Errorf("revoke missing: %v", r.err)
	}
}

// TestKeysWorkspaces: `reins workspaces create` makes a workspace, `reins
// keys create --role developer --workspace` a key bound to it, which the
// server lets read its workspace but not the Admin API; `keys list` shows
// the role and workspace; the default workspace cannot be archived.
func TestKeysWorkspaces(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	r := execute(ctx, "", "workspaces", "create", "team", "--data-dir", s.dataDir)
	ws := strings.TrimSpace(r.stdout)
	if r.err != nil || !strings.HasPrefix(ws, "wrkspc_") {
		t.Fatalf("workspaces create: %v %q", r.err, r.stdout)
	}
	if r = execute(ctx, "", "keys", "create", "--role", "developer", "--data-dir", s.dataDir); r.err == nil || !strings.Contains(r.err.Error(), "--workspace") {
		t.Fatalf("developer without workspace: %v", r.err)
	}
	r = execute(ctx, "", "keys", "create", "--name", "dev", "--role", "developer", "--workspace", ws, "--data-dir", s.dataDir)
	if r.err != nil {
		t.Fatalf("%v %s", r.err, r.stderr)
	}
	key := strings.TrimSpace(r.stdout)
	if ok := execute(ctx, "", "agents", "list", "--url", s.url, "--api-key", key); ok.err != nil {
		t.Fatalf("developer key refused: %v", ok.err)
	}
	r = execute(ctx, "", "keys", "list", "--data-dir", s.dataDir)
	if !strings.Contains(r.stdout, "developer") || !strings.Contains(r.stdout, ws) || !strings.Contains(r.stdout, "ROLE") {
		t.Fatalf("keys list:\n%s", r.stdout)
	}
	r = execute(ctx, "", "workspaces", "list", "--data-dir", s.dataDir)
	if !strings.Contains(r.stdout, ws) || !strings.Contains(r.stdout, "wrkspc_default") {
		t.Fatalf("workspaces list:\n%s", r.stdout)
	}
	if r = execute(ctx, "", "workspaces", "archive", "wrkspc_default", "--data-dir", s.dataDir); r.err == nil {
		t.Fatal("archived the default workspace")
	}
	if r = execute(ctx, "", "workspaces", "archive", ws, "--data-dir", s.dataDir); r.err != nil {
		t.Fatal(r.err)
	}
}
