package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

func newMemoryStore(t *testing.T, ctx context.Context, s store.Store, name string) ma.MemoryStore {
	t.Helper()
	ts := now()
	m := ma.MemoryStore{ID: ids.New(ids.MemoryStore), Type: "memory_store", Name: name, Metadata: ma.Metadata{}, CreatedAt: ts, UpdatedAt: ts}
	if err := s.CreateMemoryStore(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func ptr[T any](v T) *T { return &v }

var apiActor = &ma.Actor{Type: ma.ActorAPI, APIKeyID: "apikey_1"}

// memWrite is a write of a memory by apiActor.
func memWrite(storeID, id string, path, content *string) store.MemoryWrite {
	return store.MemoryWrite{StoreID: storeID, MemoryID: id, VersionID: ids.New(ids.MemoryVersion), Path: path, Content: content,
		Actor: apiActor, At: time.Now()}
}

func createMemory(t *testing.T, ctx context.Context, s store.Store, storeID, path, content string) ma.Memory {
	t.Helper()
	m, err := s.CreateMemory(ctx, memWrite(storeID, ids.New(ids.Memory), &path, &content))
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	return m
}

func testMemoryStores(t *testing.T, s store.Store) {
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	a := newMemoryStore(t, ctx, s, "Alpha")
	b := newMemoryStore(t, ctx, s, "Beta")
	got, err := s.GetMemoryStore(ctx, a.ID)
	if err != nil || got.Name != "Alpha" {
		t.Fatalf("GetMemoryStore = %+v, %v", got, err)
	}
	up, err := s.UpdateMemoryStore(ctx, a.ID, func(m *ma.MemoryStore) error { m.Description = "notes"; return nil })
	if err != nil || up.Description != "notes" {
		t.Fatalf("UpdateMemoryStore = %+v, %v", up, err)
	}
	if _, err := s.ArchiveMemoryStore(ctx, b.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	items, err := s.ListMemoryStores(ctx, store.ListQuery{Limit: 10})
	if err != nil || len(items) != 1 || items[0].Value.ID != a.ID {
		t.Fatalf("ListMemoryStores = %+v, %v; want only the live store", items, err)
	}
	items, _ = s.ListMemoryStores(ctx, store.ListQuery{Limit: 10, IncludeArchived: true})
	if len(items) != 2 {
		t.Fatalf("ListMemoryStores with archived = %d items, want 2", len(items))
	}
	// Another workspace sees none of them.
	other := store.WithWorkspace(context.Background(), "wrkspc_other")
	if _, err := s.GetMemoryStore(other, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMemoryStore from another workspace: %v, want ErrNotFound", err)
	}
	m := createMemory(t, ctx, s, a.ID, "/x.md", "x")
	if _, err := s.GetMemory(other, a.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMemory from another workspace: %v, want ErrNotFound", err)
	}
	if _, err := s.ListMemories(other, a.ID, store.MemoryQuery{Limit: 10}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ListMemories from another workspace: %v, want ErrNotFound", err)
	}
	if err := s.DeleteMemoryStore(other, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteMemoryStore from another workspace: %v, want ErrNotFound", err)
	}
	if err := s.DeleteMemoryStore(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMemory(context.Background(), a.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("memory after its store's delete: %v", err)
	}
	if _, err := s.ListMemoryVersions(context.Background(), a.ID, store.MemoryVersionQuery{ListQuery: store.ListQuery{Limit: 10}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("versions after the store's delete: %v", err)
	}
}

func testMemories(t *testing.T, s store.Store) {
	ctx := context.Background()
	ms := newMemoryStore(t, ctx, s, "m")
	m := createMemory(t, ctx, s, ms.ID, "/notes/todo.md", "buy milk")
	if m.ContentSHA256 != sha("buy milk") || m.ContentSizeBytes != 8 || m.MemoryVersionID == "" {
		t.Fatalf("created memory %+v", m)
	}
	// Taken and overlapping paths conflict, naming the memory in the way.
	for _, p := range []string{"/notes/todo.md", "/notes", "/notes/todo.md/sub"} {
		_, err := s.CreateMemory(ctx, memWrite(ms.ID, ids.New(ids.Memory), ptr(p), ptr("")))
		var pc *store.PathConflictError
		if !errors.As(err, &pc) || pc.MemoryID != m.ID || pc.MemoryPath != "/notes/todo.md" || !errors.Is(err, store.ErrConflict) {
			t.Fatalf("create %s: %v, want a path conflict with %s", p, err, m.ID)
		}
	}
	// A sibling whose name extends a segment does not overlap.
	createMemory(t, ctx, s, ms.ID, "/notes-archive/todo.md", "")
	createMemory(t, ctx, s, ms.ID, "/notes/todo.mdx", "")

	// A no-op update records nothing, even with a stale precondition.
	w := memWrite(ms.ID, m.ID, nil, ptr("buy milk"))
	w.IfSHA256 = sha("stale")
	same, err := s.UpdateMemory(ctx, w)
	if err != nil || same.MemoryVersionID != m.MemoryVersionID {
		t.Fatalf("no-op update = %+v, %v", same, err)
	}
	// A stale precondition fails a real change.
	w = memWrite(ms.ID, m.ID, nil, ptr("buy eggs"))
	w.IfSHA256 = sha("stale")
	if _, err := s.UpdateMemory(ctx, w); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("stale precondition: %v", err)
	}
	w.IfSHA256 = m.ContentSHA256
	up, err := s.UpdateMemory(ctx, w)
	if err != nil || *up.Content != "buy eggs" || up.MemoryVersionID == m.MemoryVersionID || up.ContentSHA256 != sha("buy eggs") {
		t.Fatalf("update = %+v, %v", up, err)
	}
	// Renames keep the id; into an overlapping path they conflict.
	if _, err := s.UpdateMemory(ctx, memWrite(ms.ID, m.ID, ptr("/notes-archive"), nil)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("rename onto an ancestor: %v", err)
	}
	ren, err := s.UpdateMemory(ctx, memWrite(ms.ID, m.ID, ptr("/done/todo.md"), nil))
	if err != nil || ren.ID != m.ID || ren.Path != "/done/todo.md" || *ren.Content != "buy eggs" {
		t.Fatalf("rename = %+v, %v", ren, err)
	}
	got, err := s.GetMemory(ctx, ms.ID, m.ID)
	if err != nil || got.Path != "/done/todo.md" || got.MemoryVersionID != ren.MemoryVersionID {
		t.Fatalf("GetMemory = %+v, %v", got, err)
	}
	// Delete with a stale expectation deletes nothing.
	d := memWrite(ms.ID, m.ID, nil, nil)
	d.IfSHA256 = sha("buy milk")
	if err := s.DeleteMemory(ctx, d); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("stale delete: %v", err)
	}
	d.IfSHA256 = sha("buy eggs")
	if err := s.DeleteMemory(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMemory(ctx, ms.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted memory: %v", err)
	}
	// The path is free again.
	createMemory(t, ctx, s, ms.ID, "/done/todo.md", "again")

	// An archived store's memories are read-only, but can be deleted.
	if _, err := s.ArchiveMemoryStore(ctx, ms.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateMemory(ctx, memWrite(ms.ID, ids.New(ids.Memory), ptr("/new"), ptr(""))); !errors.Is(err, store.ErrArchived) {
		t.Fatalf("create in an archived store: %v", err)
	}
	items, _ := s.ListMemories(ctx, ms.ID, store.MemoryQuery{Limit: 10})
	if err := s.DeleteMemory(ctx, memWrite(ms.ID, items[0].Memory.ID, nil, nil)); err != nil {
		t.Fatalf("delete in an archived store: %v", err)
	}
	testMemoryList(t, s)
	testMemoryLimit(t, s)
}

func testMemoryList(t *testing.T, s store.Store) {
	ctx := context.Background()
	ms := newMemoryStore(t, ctx, s, "list")
	for _, p := range []string{"/b.md", "/a/x.md", "/a/y/z.md", "/a/y/w.md", "/a-b.md", "/c/d/e.md"} {
		createMemory(t, ctx, s, ms.ID, p, "content of "+p)
	}
	keys := func(q store.MemoryQuery) []string {
		t.Helper()
		items, err := s.ListMemories(ctx, ms.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			if it.Memory != nil && (it.Memory.Content != nil) != q.Full {
				t.Fatalf("%s: content read = %v, want %v", it.Key(), it.Memory.Content != nil, q.Full)
			}
			out = append(out, it.Key())
		}
		return out
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list = %v, want %v", got, want)
		}
	}
	check(keys(store.MemoryQuery{Limit: 100}), "/a-b.md", "/a/x.md", "/a/y/w.md", "/a/y/z.md", "/b.md", "/c/d/e.md")
	check(keys(store.MemoryQuery{Limit: 100, Depth: 1}), "/a-b.md", "/a/", "/b.md", "/c/")
	check(keys(store.MemoryQuery{Limit: 100, Depth: 1, Prefix: "/a/"}), "/a/x.md", "/a/y/")
	check(keys(store.MemoryQuery{Limit: 100, Prefix: "/a/", Full: true}), "/a/x.md", "/a/y/w.md", "/a/y/z.md")
	check(keys(store.MemoryQuery{Limit: 2, Depth: 1}), "/a-b.md", "/a/")
	check(keys(store.MemoryQuery{Limit: 2, Depth: 1, After: "/a/"}), "/b.md", "/c/")
	check(keys(store.MemoryQuery{Limit: 2, After: "/a/y/w.md", Full: true}), "/a/y/z.md", "/b.md")
	check(keys(store.MemoryQuery{Limit: 10, Prefix: "/nothing/"}))
}

func testMemoryLimit(t *testing.T, s store.Store) {
	if testing.Short() {
		return
	}
	ctx := context.Background()
	ms := newMemoryStore(t, ctx, s, "full")
	for i := range ma.MaxMemoriesPerStore {
		createMemory(t, ctx, s, ms.ID, fmt.Sprintf("/m%d", i), "")
	}
	_, err := s.CreateMemory(ctx, memWrite(ms.ID, ids.New(ids.Memory), ptr("/one-more"), ptr("")))
	if !errors.Is(err, store.ErrLimit) {
		t.Fatalf("memory %d: %v, want ErrLimit", ma.MaxMemoriesPerStore+1, err)
	}
}

func testMemoryVersions(t *testing.T, s store.Store) {
	ctx := context.Background()
	ms := newMemoryStore(t, ctx, s, "v")
	m := createMemory(t, ctx, s, ms.ID, "/a.md", "one")
	sess := &ma.Actor{Type: ma.ActorSession, SessionID: "sesn_1"}
	w := memWrite(ms.ID, m.ID, nil, ptr("two"))
	w.Actor = sess
	if _, err := s.UpdateMemory(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateMemory(ctx, memWrite(ms.ID, m.ID, nil, ptr("two"))); err != nil { // no-op
		t.Fatal(err)
	}
	del := memWrite(ms.ID, m.ID, nil, nil)
	if err := s.DeleteMemory(ctx, del); err != nil {
		t.Fatal(err)
	}
	other := createMemory(t, ctx, s, ms.ID, "/b.md", "b")

	list := func(q store.MemoryVersionQuery) []ma.MemoryVersion {
		t.Helper()
		q.Limit, q.Desc = 20, true
		items, err := s.ListMemoryVersions(ctx, ms.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]ma.MemoryVersion, len(items))
		for i, it := range items {
			out[i] = it.Value
		}
		return out
	}
	all := list(store.MemoryVersionQuery{})
	if len(all) != 4 || all[0].MemoryID != other.ID {
		t.Fatalf("versions = %+v, want 4, newest first", all)
	}
	vs := list(store.MemoryVersionQuery{MemoryID: m.ID, Full: true})
	if len(vs) != 3 || vs[0].Operation != ma.MemoryDeleted || vs[1].Operation != ma.MemoryModified || vs[2].Operation != ma.MemoryCreated {
		t.Fatalf("versions of the deleted memory = %+v", vs)
	}
	if vs[0].Content != nil || vs[0].ContentSHA256 != nil || vs[0].ContentSizeBytes != nil || vs[0].Path == nil || *vs[0].Path != "/a.md" {
		t.Fatalf("deleted version = %+v", vs[0])
	}
	if *vs[1].Content != "two" || *vs[1].ContentSHA256 != sha("two") || *vs[1].ContentSizeBytes != 3 || *vs[1].CreatedBy != *sess {
		t.Fatalf("modified version = %+v", vs[1])
	}
	if *vs[2].CreatedBy != *apiActor {
		t.Fatalf("created version's actor = %+v", vs[2].CreatedBy)
	}
	if basic := list(store.MemoryVersionQuery{MemoryID: m.ID}); basic[1].Content != nil || basic[1].ContentSHA256 == nil {
		t.Fatalf("basic version = %+v", basic[1])
	}
	for _, c := range []struct {
		q    store.MemoryVersionQuery
		want int
	}{
		{store.MemoryVersionQuery{Operation: ma.MemoryCreated}, 2},
		{store.MemoryVersionQuery{SessionID: "sesn_1"}, 1},
		{store.MemoryVersionQuery{APIKeyID: "apikey_1"}, 3},
		{store.MemoryVersionQuery{ServiceAccountID: "svac_1"}, 0},
		{store.MemoryVersionQuery{ListQuery: store.ListQuery{CreatedGTE: ptr(time.Now().Add(time.Hour))}}, 0},
		{store.MemoryVersionQuery{ListQuery: store.ListQuery{CreatedLTE: ptr(time.Now().Add(time.Hour))}}, 4},
	} {
		if got := list(c.q); len(got) != c.want {
			t.Fatalf("versions with %+v: %d, want %d", c.q, len(got), c.want)
		}
	}
	red, err := s.RedactMemoryVersion(ctx, ms.ID, vs[1].ID, apiActor, time.Now())
	if err != nil || red.Content != nil || red.Path != nil || red.ContentSHA256 != nil || red.ContentSizeBytes != nil ||
		red.RedactedAt == nil || *red.RedactedBy != *apiActor || *red.CreatedBy != *sess {
		t.Fatalf("redacted = %+v, %v", red, err)
	}
	again, err := s.RedactMemoryVersion(ctx, ms.ID, vs[1].ID, &ma.Actor{Type: ma.ActorAPI, APIKeyID: "apikey_2"}, time.Now())
	if err != nil || *again.RedactedBy != *apiActor || *again.RedactedAt != *red.RedactedAt {
		t.Fatalf("second redaction = %+v, %v; want the first kept", again, err)
	}
	if _, err := s.GetMemoryVersion(ctx, ms.ID, "memver_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	if got, err := s.GetMemoryVersion(ctx, ms.ID, vs[2].ID); err != nil || *got.Content != "one" {
		t.Fatalf("GetMemoryVersion = %+v, %v", got, err)
	}
}

// testMemoryRace: concurrent updates of one memory, each with the
// precondition of the content they read, change it once: exactly one
// wins, the others fail their precondition, and one version is recorded.
func testMemoryRace(t *testing.T, s store.Store) {
	ctx := context.Background()
	ms := newMemoryStore(t, ctx, s, "race")
	m := createMemory(t, ctx, s, ms.ID, "/counter", "0")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			w := memWrite(ms.ID, m.ID, nil, ptr(fmt.Sprintf("writer %d", i)))
			w.IfSHA256 = m.ContentSHA256
			_, errs[i] = s.UpdateMemory(ctx, w)
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrPrecondition):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won, want exactly 1", won)
	}
	items, err := s.ListMemoryVersions(ctx, ms.ID, store.MemoryVersionQuery{MemoryID: m.ID, ListQuery: store.ListQuery{Limit: 20}})
	if err != nil || len(items) != 2 {
		t.Fatalf("versions = %d, %v; want created + one modified", len(items), err)
	}
	// Concurrent creates of overlapping paths: exactly one wins.
	paths := []string{"/dir", "/dir/a", "/dir/b", "/dir/a/b"}
	errs = make([]error, len(paths))
	for i, p := range paths {
		wg.Go(func() { _, errs[i] = s.CreateMemory(ctx, memWrite(ms.ID, ids.New(ids.Memory), ptr(p), ptr(""))) })
	}
	wg.Wait()
	list, _ := s.ListMemories(ctx, ms.ID, store.MemoryQuery{Prefix: "/dir/", Limit: 10})
	dir, _ := s.ListMemories(ctx, ms.ID, store.MemoryQuery{Limit: 10})
	for i, err := range errs {
		if err != nil && !errors.Is(err, store.ErrConflict) {
			t.Fatalf("create %s: %v", paths[i], err)
		}
	}
	// Either /dir alone, or some of /dir/a, /dir/b (/dir/a/b never with /dir/a).
	hasDir := false
	for _, it := range dir {
		hasDir = hasDir || it.Key() == "/dir"
	}
	if hasDir && len(list) > 0 {
		t.Fatalf("/dir and %d memories below it were created", len(list))
	}
	for _, it := range list {
		if it.Key() == "/dir/a/b" {
			for _, o := range list {
				if o.Key() == "/dir/a" {
					t.Fatal("/dir/a and /dir/a/b were both created")
				}
			}
		}
	}
}

// testMemoryRetention: pruning deletes the versions older than the
// bound, but never a memory's latest (a deleted memory's "deleted"
// version included), in batches of the limit given.
func testMemoryRetention(t *testing.T, s store.Store) {
	ctx := context.Background()
	ms := newMemoryStore(t, ctx, s, "retention")
	old := time.Now().Add(-48 * time.Hour)
	write := func(w store.MemoryWrite) store.MemoryWrite { w.At = old; return w }
	p, c := "/a.md", "one"
	a, err := s.CreateMemory(ctx, write(memWrite(ms.ID, ids.New(ids.Memory), &p, &c)))
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"two", "three"} {
		if _, err := s.UpdateMemory(ctx, write(memWrite(ms.ID, a.ID, nil, &body))); err != nil {
			t.Fatal(err)
		}
	}
	p2, c2 := "/gone.md", "x"
	g, err := s.CreateMemory(ctx, write(memWrite(ms.ID, ids.New(ids.Memory), &p2, &c2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMemory(ctx, write(memWrite(ms.ID, g.ID, nil, nil))); err != nil {
		t.Fatal(err)
	}
	recent := "four, today"
	if _, err := s.UpdateMemory(ctx, memWrite(ms.ID, a.ID, nil, &recent)); err != nil {
		t.Fatal(err)
	}
	// Versions: a created, two, three (old), four (today); gone created (old), deleted (old).
	bound := time.Now().Add(-24 * time.Hour)
	n, err := s.PruneMemoryVersions(ctx, bound, 2)
	if err != nil || n != 2 {
		t.Fatalf("first batch: %d %v", n, err)
	}
	n, err = s.PruneMemoryVersions(ctx, bound, 2)
	if err != nil || n != 2 {
		t.Fatalf("second batch: %d %v", n, err)
	}
	if n, err := s.PruneMemoryVersions(ctx, bound, 2); err != nil || n != 0 {
		t.Fatalf("third batch: %d %v", n, err)
	}
	vs, err := s.ListMemoryVersions(ctx, ms.ID, store.MemoryVersionQuery{ListQuery: store.ListQuery{Limit: 100}, Full: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.Value.Operation+" "+*v.Value.Path)
	}
	if want := []string{"deleted /gone.md", "modified /a.md"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if *vs[1].Value.Content != recent {
		t.Fatalf("kept the wrong version of /a.md: %q", *vs[1].Value.Content)
	}
}
