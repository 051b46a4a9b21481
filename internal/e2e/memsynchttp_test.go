package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/executor/memsync"
)

// TestMemorySyncOverHTTP: the directory sync that remote hands use,
// through a real server's memory endpoints: a first pull writes the
// store, a push creates, modifies and deletes memories, an unchanged
// store is not listed again, a change over the API reaches the directory,
// and a memory changed on both sides keeps the store's content.
func TestMemorySyncOverHTTP(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	c := s.client.Beta.MemoryStores
	ms, err := c.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "over http"})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := c.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/keep.md", Content: anthropic.String("kept\n")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/old/drop.md", Content: anthropic.String("drop\n")}); err != nil {
		t.Fatal(err)
	}
	st := &memsync.HTTPStore{BaseURL: s.url, Token: s.key}
	d := &memsync.Dir{StoreID: ms.ID, Path: filepath.Join(t.TempDir(), "m"), Mount: "/mnt/memory/over-http"}
	if p, err := d.Pull(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("first pull: %v %v", p, err)
	}
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(d.Path, name)); return string(b) }
	if read("keep.md") != "kept\n" || read("old/drop.md") != "drop\n" {
		t.Fatalf("pulled %q %q", read("keep.md"), read("old/drop.md"))
	}
	os.WriteFile(filepath.Join(d.Path, "new.md"), []byte("new\n"), 0o644)
	os.WriteFile(filepath.Join(d.Path, "keep.md"), []byte("kept, edited\n"), 0o644)
	os.RemoveAll(filepath.Join(d.Path, "old"))
	if p, err := d.Push(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("push: %v %v", p, err)
	}
	if got := s.memoryPaths(t, ms.ID); got != "/keep.md,/new.md" {
		t.Fatalf("store holds %s", got)
	}
	// The store's change reaches the directory; a two-sided change keeps
	// the store's.
	if _, err := c.Memories.Update(ctx, keep.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Content: anthropic.String("from the API\n")}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.Path, "keep.md"), []byte("from the directory\n"), 0o644)
	if p, err := d.Push(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("conflicting push: %v %v", p, err)
	}
	if p, err := d.Pull(ctx, st); err != nil || len(p) > 0 {
		t.Fatalf("pull: %v %v", p, err)
	}
	if read("keep.md") != "from the API\n" {
		t.Fatalf("keep.md holds %q", read("keep.md"))
	}
	os.WriteFile(filepath.Join(d.Path, "big.md"), []byte(strings.Repeat("x", 101<<10)), 0o644)
	p, err := d.Push(ctx, st)
	if err != nil || len(p) != 1 || !strings.Contains(p[0], "/mnt/memory/over-http/big.md was not saved") {
		t.Fatalf("big push: %q %v", p, err)
	}
}
