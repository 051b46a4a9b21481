package memsync_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor/memsync"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// newStore returns a new memory store in a new database, and the database
// as the Store of memory directories (as the server syncs them).
func newStore(t *testing.T) (*sqlite.Store, memsync.Store, string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id := ids.New(ids.MemoryStore)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if err := st.CreateMemoryStore(ctx, ma.MemoryStore{ID: id, Type: "memory_store", Name: "prefs", Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return st, memories.SyncStore(st), id
}

// put creates or replaces a memory over the API's path (an api_actor).
func put(t *testing.T, st *sqlite.Store, storeID, p, content string) {
	t.Helper()
	ctx := context.Background()
	items, err := st.ListMemories(ctx, storeID, store.MemoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	w := store.MemoryWrite{StoreID: storeID, VersionID: ids.New(ids.MemoryVersion), Content: &content,
		Actor: &ma.Actor{Type: ma.ActorAPI, APIKeyID: "key_1"}, At: time.Now()}
	for _, it := range items {
		if it.Memory != nil && it.Memory.Path == p {
			w.MemoryID = it.Memory.ID
			if _, err := st.UpdateMemory(ctx, w); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	w.MemoryID, w.Path = ids.New(ids.Memory), &p
	if _, err := st.CreateMemory(ctx, w); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, st *sqlite.Store, storeID string) map[string]string {
	t.Helper()
	items, err := st.ListMemories(context.Background(), storeID, store.MemoryQuery{Limit: 100, Full: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range items {
		out[it.Memory.Path] = *it.Memory.Content
	}
	return out
}

func newDir(t *testing.T, storeID, session string) *memsync.Dir {
	return &memsync.Dir{StoreID: storeID, Path: filepath.Join(t.TempDir(), "prefs"), Mount: "/mnt/memory/prefs",
		Actor: ma.Actor{Type: ma.ActorSession, SessionID: session}}
}

// TestTwoSessions: what one session's directory changes reaches the store
// as its versions and, at the other's next pull, the other's directory;
// deletes and changes over the API too.
func TestTwoSessions(t *testing.T) {
	ctx := context.Background()
	db, st, sid := newStore(t)
	put(t, db, sid, "/a.md", "from the API\n")
	a, b := newDir(t, sid, "sesn_a"), newDir(t, sid, "sesn_b")
	for _, d := range []*memsync.Dir{a, b} {
		if _, err := d.Pull(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(a.Path, "a.md")); string(got) != "from the API\n" {
		t.Fatalf("first pull wrote %q", got)
	}
	os.MkdirAll(filepath.Join(a.Path, "deep"), 0o755)
	os.WriteFile(filepath.Join(a.Path, "deep", "notes.md"), []byte("learned\n"), 0o644)
	os.WriteFile(filepath.Join(a.Path, "a.md"), []byte("edited by a\n"), 0o644)
	if p, err := a.Push(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("push: %v %v", p, err)
	}
	want := map[string]string{"/a.md": "edited by a\n", "/deep/notes.md": "learned\n"}
	if got := contents(t, db, sid); !equal(got, want) {
		t.Fatalf("store holds %v", got)
	}
	// Nothing changed: nothing is written.
	if p, err := a.Push(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("second push: %v %v", p, err)
	}
	if p, err := b.Pull(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("b's pull: %v %v", p, err)
	}
	if got, _ := os.ReadFile(filepath.Join(b.Path, "deep", "notes.md")); string(got) != "learned\n" {
		t.Fatalf("b reads %q", got)
	}
	os.Remove(filepath.Join(b.Path, "a.md"))
	if _, err := b.Push(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pull(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.Path, "a.md")); !os.IsNotExist(err) {
		t.Fatalf("a still has the deleted memory: %v", err)
	}
	vs, err := db.ListMemoryVersions(ctx, sid, store.MemoryVersionQuery{ListQuery: store.ListQuery{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.Value.Operation+" "+v.Value.CreatedBy.Type+" "+v.Value.CreatedBy.SessionID)
	}
	wantV := []string{"created api_actor ", "created session_actor sesn_a", "deleted session_actor sesn_b", "modified session_actor sesn_a"}
	slices.Sort(got) // a push writes in the order it walks the directory
	if strings.Join(got, "|") != strings.Join(wantV, "|") {
		t.Fatalf("versions:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantV, "\n"))
	}
}

// TestStoreWins: a memory changed in the store and in the directory
// since the last sync keeps the store's content (its version is not
// lost), as the official worker decides.
func TestStoreWins(t *testing.T) {
	ctx := context.Background()
	db, st, sid := newStore(t)
	put(t, db, sid, "/a.md", "one\n")
	d := newDir(t, sid, "sesn_a")
	if _, err := d.Pull(ctx, st); err != nil {
		t.Fatal(err)
	}
	put(t, db, sid, "/a.md", "two, over the API\n")
	os.WriteFile(filepath.Join(d.Path, "a.md"), []byte("two, in the session\n"), 0o644)
	if p, err := d.Push(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("push: %v %v", p, err)
	}
	if got := contents(t, db, sid)["/a.md"]; got != "two, over the API\n" {
		t.Fatalf("store holds %q", got)
	}
	if _, err := d.Pull(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(d.Path, "a.md")); string(got) != "two, over the API\n" {
		t.Fatalf("directory holds %q", got)
	}
}

// TestProblems: what cannot be a memory is reported, not saved: a file
// over 100 kB, a link (never followed: its target stays unread), a file
// that is not UTF-8; a read-only directory pushes nothing.
func TestProblems(t *testing.T) {
	ctx := context.Background()
	db, st, sid := newStore(t)
	d := newDir(t, sid, "sesn_a")
	if _, err := d.Pull(ctx, st); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "master.key")
	os.WriteFile(secret, []byte("SECRET"), 0o600)
	os.WriteFile(filepath.Join(d.Path, "big.md"), []byte(strings.Repeat("x", 101<<10)), 0o644)
	os.Symlink(secret, filepath.Join(d.Path, "key.md"))
	os.WriteFile(filepath.Join(d.Path, "bin.md"), []byte{0xff, 0xfe}, 0o644)
	os.WriteFile(filepath.Join(d.Path, "ok.md"), []byte("fine\n"), 0o644)
	problems, err := d.Push(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{"/mnt/memory/prefs/big.md was not saved to the memory store: it is over the limit of a memory (102400 bytes, 100 kB)",
		"/mnt/memory/prefs/key.md is not a regular file", "/mnt/memory/prefs/bin.md was not saved to the memory store: its content must be valid UTF-8"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if got := contents(t, db, sid); !equal(got, map[string]string{"/ok.md": "fine\n"}) {
		t.Fatalf("store holds %v", got)
	}
	ro := newDir(t, sid, "sesn_b")
	ro.ReadOnly = true
	if _, err := ro.Pull(ctx, st); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ro.Path, "ok.md"), []byte("changed\n"), 0o644)
	if p, err := ro.Push(ctx, st); err != nil || len(p) > 0 {
		t.Fatal(p, err)
	}
	if got := contents(t, db, sid)["/ok.md"]; got != "fine\n" {
		t.Fatalf("a read-only directory pushed: %q", got)
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestDirectoryInTheWay: a memory the pull cannot write (the session made
// a directory at its path) is a problem, not an error that would stop the
// session's tools; once the way is clear, the next pull writes it.
func TestDirectoryInTheWay(t *testing.T) {
	ctx := context.Background()
	db, st, sid := newStore(t)
	d := newDir(t, sid, "sesn_a")
	if _, err := d.Pull(ctx, st); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(d.Path, "a.md", "inner"), 0o755)
	put(t, db, sid, "/a.md", "from the API\n")
	problems, err := d.Pull(ctx, st)
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "/mnt/memory/prefs/a.md could not be brought up to date") {
		t.Fatalf("pull: %q %v", problems, err)
	}
	os.RemoveAll(filepath.Join(d.Path, "a.md"))
	if problems, err := d.Pull(ctx, st); err != nil || len(problems) > 0 {
		t.Fatalf("second pull: %q %v", problems, err)
	}
	if got, _ := os.ReadFile(filepath.Join(d.Path, "a.md")); string(got) != "from the API\n" {
		t.Fatalf("a.md holds %q", got)
	}
}

// TestFreshPullPrunes: a directory's first pull (after a restart, or on
// another replica) makes it the store: a file whose memory was deleted
// meanwhile is removed, not pushed back; a file the store holds as it is
// stays.
func TestFreshPullPrunes(t *testing.T) {
	ctx := context.Background()
	db, st, sid := newStore(t)
	put(t, db, sid, "/a.md", "kept\n")
	put(t, db, sid, "/gone.md", "deleted later\n")
	d := newDir(t, sid, "sesn_a")
	if _, err := d.Pull(ctx, st); err != nil {
		t.Fatal(err)
	}
	items, _ := db.ListMemories(ctx, sid, store.MemoryQuery{Limit: 10})
	for _, it := range items {
		if it.Memory.Path == "/gone.md" {
			if err := db.DeleteMemory(ctx, store.MemoryWrite{StoreID: sid, MemoryID: it.Memory.ID, VersionID: ids.New(ids.MemoryVersion), At: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	again := &memsync.Dir{StoreID: sid, Path: d.Path, Mount: d.Mount, Actor: d.Actor} // the state of d is lost
	if p, err := again.Pull(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("pull: %v %v", p, err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, "gone.md")); !os.IsNotExist(err) {
		t.Fatalf("gone.md is still there: %v", err)
	}
	if p, err := again.Push(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("push: %v %v", p, err)
	}
	if got := contents(t, db, sid); !equal(got, map[string]string{"/a.md": "kept\n"}) {
		t.Fatalf("store holds %v", got)
	}
}
