package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestMemoryStoresCLI: a memory store created, listed, shown, updated
// (its description cleared and a metadata key removed), archived (then
// refused a write, with the API's message) and deleted.
func TestMemoryStoresCLI(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "memory", "stores", "create", "--name", "Team notes", "--description", "what the team decided", "--metadata", "team=docs", "--metadata", "tier=1").must(t)
	assertContains(t, r.stdout, "name:", "Team notes", "what the team decided", "team=docs tier=1")
	id := regexp.MustCompile(`memstore_\w+`).FindString(r.stdout)
	if id == "" {
		t.Fatalf("no store id in:\n%s", r.stdout)
	}
	r = s.run(t, "memory", "stores", "list").must(t)
	assertContains(t, r.stdout, "ID", "DESCRIPTION", id, "Team notes", "what the team decided")
	r = s.run(t, "memory", "stores", "update", id, "--name", "Notes", "--description", "", "--unset-metadata", "team", "-o", "json").must(t)
	if got := jsonField(t, r.stdout, "name"); got != "Notes" {
		t.Errorf("name = %v", got)
	}
	if got := jsonField(t, r.stdout, "description"); got != "" {
		t.Errorf("description = %v", got)
	}
	if got := jsonField(t, r.stdout, "metadata").(map[string]any); len(got) != 1 || got["tier"] != "1" {
		t.Errorf("metadata = %v", got)
	}
	if r := s.run(t, "memory", "stores", "update", id); r.err == nil || !strings.Contains(r.err.Error(), "nothing to update") {
		t.Errorf("an empty update: %v", r.err)
	}
	r = s.run(t, "memory", "stores", "get", id).must(t)
	assertContains(t, r.stdout, "Notes", "tier=1")

	r = s.run(t, "memory", "stores", "archive", id).must(t)
	assertContains(t, r.stdout, "archived:")
	r = s.runIn(t, "x", "memory", "put", id, "/a.md")
	if r.err == nil || !strings.Contains(r.err.Error(), "archived") || !strings.Contains(r.err.Error(), "HTTP 409") {
		t.Errorf("a write to an archived store: %v", r.err)
	}
	r = s.run(t, "memory", "stores", "list").must(t)
	if strings.Contains(r.stdout, id) {
		t.Errorf("an archived store is listed without --include-archived:\n%s", r.stdout)
	}
	r = s.run(t, "memory", "stores", "list", "--include-archived").must(t)
	assertContains(t, r.stdout, id)
	r = s.run(t, "memory", "stores", "delete", id).must(t)
	assertContains(t, r.stdout, "deleted "+id)
	if r := s.run(t, "memory", "stores", "get", id); r.err == nil || !strings.Contains(r.err.Error(), "HTTP 404") {
		t.Errorf("a deleted store: %v", r.err)
	}
}

// TestMemoryFilesCLI: memories written with put (stdin and --file, a
// replace guarded by --if-sha256), read with cat, shown as a tree at
// every depth and below a prefix, their versions listed with who made
// them (an API key, a session), one shown, two compared, one redacted,
// and one memory removed.
func TestMemoryFilesCLI(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "memory", "stores", "create", "--name", "Notes").must(t)
	st := regexp.MustCompile(`memstore_\w+`).FindString(r.stdout)
	plan := filepath.Join(t.TempDir(), "plan.md")
	if err := os.WriteFile(plan, []byte("# Plan\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	style := "one\ntwo\nthree\n"
	r = s.runIn(t, style, "memory", "put", st, "/style.md").must(t)
	assertContains(t, r.stdout, "created /style.md (mem_", "14 B", "sha256 "+sha(style))
	s.runIn(t, "", "memory", "put", st, "/projects/a/plan.md", "--file", plan).must(t)
	s.runIn(t, "b", "memory", "put", st, "/projects/b.md").must(t)
	s.runIn(t, "deep", "memory", "put", st, "/projects/a/deep/x.md", "--file", "-").must(t)

	r = s.run(t, "memory", "ls", st).must(t)
	want := `/
├── projects/
│   ├── a/
│   │   ├── deep/
│   │   │   └── x.md  4 B
│   │   └── plan.md  7 B
│   └── b.md  1 B
└── style.md  14 B

3 folders, 4 memories, 26 B
`
	if r.stdout != want {
		t.Errorf("ls:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = s.run(t, "memory", "ls", st, "--depth", "1").must(t)
	assertContains(t, r.stdout, "├── projects/  … 3 memories, 12 B\n└── style.md  14 B\n")
	r = s.run(t, "memory", "ls", st, "--prefix", "/projects", "--depth", "1").must(t)
	assertContains(t, r.stdout, "/projects/\n├── a/  … 2 memories, 11 B\n└── b.md  1 B\n\n1 folder, 3 memories, 12 B\n")
	r = s.run(t, "memory", "ls", st, "--depth", "2", "-o", "json").must(t)
	items, _ := jsonField(t, r.stdout, "data").([]any)
	var got []string
	for _, it := range items {
		m := it.(map[string]any)
		got = append(got, m["type"].(string)+" "+m["path"].(string))
	}
	if strings.Join(got, ",") != "memory_prefix /projects/a/,memory /projects/b.md,memory /style.md" {
		t.Errorf("ls -o json --depth 2: %v", got)
	}

	r = s.run(t, "memory", "cat", st, "/style.md").must(t)
	if r.stdout != style {
		t.Errorf("cat: %q", r.stdout)
	}
	if r := s.run(t, "memory", "cat", st, "/projects/a"); r.err == nil || !strings.Contains(r.err.Error(), "/projects/a is a folder") {
		t.Errorf("cat of a folder: %v", r.err)
	}
	if r := s.run(t, "memory", "cat", st, "/nope.md"); r.err == nil || !strings.Contains(r.err.Error(), "no memory at /nope.md") {
		t.Errorf("cat of nothing: %v", r.err)
	}
	if r := s.run(t, "memory", "cat", st, "mem_nope"); r.err == nil || !strings.Contains(r.err.Error(), "HTTP 404") {
		t.Errorf("cat of an unknown id: %v", r.err)
	}

	// A guarded replace: refused on a stale hash (the API's 409), done on
	// the current one; a guard on nothing is refused before any write.
	r = s.runIn(t, "one\n2\nthree\n", "memory", "put", st, "/style.md", "--if-sha256", sha("stale"))
	if r.err == nil || !strings.Contains(r.err.Error(), "memory_precondition_failed_error") {
		t.Errorf("a stale --if-sha256: %v", r.err)
	}
	r = s.runIn(t, "one\n2\nthree\n", "memory", "put", st, "/style.md", "--if-sha256", sha(style)).must(t)
	assertContains(t, r.stdout, "updated /style.md")
	if r := s.runIn(t, "x", "memory", "put", st, "/new.md", "--if-sha256", sha("x")); r.err == nil || !strings.Contains(r.err.Error(), "no memory at /new.md") {
		t.Errorf("--if-sha256 on nothing: %v", r.err)
	}

	// A session writes through its mount: a session_actor version.
	r = s.run(t, "sessions", "create", "--agent", s.agentID).must(t)
	sess := regexp.MustCompile(`sesn_\w+`).FindString(r.stdout)
	memID := jsonField(t, s.run(t, "memory", "cat", st, "/style.md", "-o", "json").must(t).stdout, "id").(string)
	final := "one\n2\nthree\nfour"
	if _, err := s.store.UpdateMemory(context.Background(), store.MemoryWrite{StoreID: st, MemoryID: memID, VersionID: ids.New(ids.MemoryVersion),
		Content: &final, Actor: &ma.Actor{Type: ma.ActorSession, SessionID: sess}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}

	r = s.run(t, "memory", "versions", st, "--path", "/style.md").must(t)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "modified") || !strings.Contains(lines[1], "session "+sess) ||
		!strings.Contains(lines[2], "api key key_") || !strings.Contains(lines[3], "created") {
		t.Fatalf("versions:\n%s", r.stdout)
	}
	vers := regexp.MustCompile(`memver_\w+`).FindAllString(r.stdout, -1)
	r = s.run(t, "memory", "versions", st, "--session", sess, "-o", "json").must(t)
	if data := jsonField(t, r.stdout, "data").([]any); len(data) != 1 {
		t.Errorf("versions --session: %d, want 1", len(data))
	}
	r = s.run(t, "memory", "version", st, vers[0]).must(t)
	assertContains(t, r.stdout, "operation:", "modified", "by:", "session "+sess, "path:", "/style.md", "\n\none\n2\nthree\nfour")

	r = s.run(t, "memory", "diff", st, vers[2], vers[0]).must(t)
	wantDiff := "--- a/style.md\t" + vers[2] + "\n+++ b/style.md\t" + vers[0] + "\n" +
		"@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n\\ No newline at end of file\n"
	if r.stdout != wantDiff {
		t.Errorf("diff:\n%s\nwant:\n%s", r.stdout, wantDiff)
	}
	r = s.run(t, "memory", "diff", st, vers[0], vers[0]).must(t)
	if r.stdout != "" || !strings.Contains(r.stderr, "the same content") {
		t.Errorf("diff of a version with itself: %q %q", r.stdout, r.stderr)
	}

	r = s.run(t, "memory", "redact", st, vers[2]).must(t)
	assertContains(t, r.stdout, "redacted:", "redacted by:", "api key key_")
	if strings.Contains(r.stdout, "path:") {
		t.Errorf("a redacted version shows a path:\n%s", r.stdout)
	}
	if r := s.run(t, "memory", "diff", st, vers[2], vers[0]); r.err == nil || !strings.Contains(r.err.Error(), "was redacted") {
		t.Errorf("diff of a redacted version: %v", r.err)
	}

	r = s.run(t, "memory", "rm", st, "/projects/b.md").must(t)
	assertContains(t, r.stdout, "deleted mem_")
	bID := regexp.MustCompile(`mem_\w+`).FindString(r.stdout)
	r = s.run(t, "memory", "versions", st, "--memory", bID).must(t)
	assertContains(t, r.stdout, "deleted", "created")
	bVers := regexp.MustCompile(`memver_\w+`).FindAllString(r.stdout, -1)
	r = s.run(t, "memory", "diff", st, bVers[1], bVers[0]).must(t)
	assertContains(t, r.stdout, "+++ /dev/null\t"+bVers[0], "-b\n")
	if r := s.run(t, "memory", "versions", st, "--path", "/projects/b.md"); r.err == nil || !strings.Contains(r.err.Error(), "pass --memory") {
		t.Errorf("versions of a deleted path: %v", r.err)
	}
}
