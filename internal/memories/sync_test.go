package memories

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor/memsync"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestSyncStore: the store as memsync's names what it creates, and its
// errors match memsync's (and the store's still) and say what the
// store's say.
func TestSyncStore(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sid := ids.New(ids.MemoryStore)
	now := ma.Time(time.Now())
	if err := db.CreateMemoryStore(ctx, ma.MemoryStore{ID: sid, Type: "memory_store", Name: "s", Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	st := SyncStore(db)
	if v, err := st.NewestVersion(ctx, sid); err != nil || v != "" {
		t.Fatalf("NewestVersion of an empty store = %q, %v", v, err)
	}
	p, content := "/a.md", "one\n"
	actor := &ma.Actor{Type: ma.ActorSession, SessionID: "sesn_a"}
	m, err := st.CreateMemory(ctx, memsync.Write{StoreID: sid, Path: &p, Content: &content, Actor: actor})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, ids.Memory) || !strings.HasPrefix(m.MemoryVersionID, ids.MemoryVersion) {
		t.Fatalf("created %s, version %s", m.ID, m.MemoryVersionID)
	}
	if v, err := st.NewestVersion(ctx, sid); err != nil || v != m.MemoryVersionID {
		t.Fatalf("NewestVersion = %q, %v, want %s", v, err, m.MemoryVersionID)
	}
	if ms, err := st.ListMemories(ctx, sid); err != nil || len(ms) != 1 || ms[0].ID != m.ID {
		t.Fatalf("ListMemories = %v, %v", ms, err)
	}

	_, err = st.CreateMemory(ctx, memsync.Write{StoreID: sid, Path: &p, Content: &content, Actor: actor})
	var conflict *memsync.PathConflictError
	if !errors.As(err, &conflict) || conflict.MemoryID != m.ID || conflict.MemoryPath != p {
		t.Errorf("a taken path: %v, want a *memsync.PathConflictError", err)
	}
	_, err = st.UpdateMemory(ctx, memsync.Write{StoreID: sid, MemoryID: m.ID, Content: &p, IfSHA256: "0", Actor: actor})
	if !errors.Is(err, memsync.ErrPrecondition) || !errors.Is(err, store.ErrPrecondition) || err.Error() == memsync.ErrPrecondition.Error() {
		t.Errorf("a failed precondition: %v", err)
	}
	if _, err := st.GetMemory(ctx, sid, "mem_none"); !errors.Is(err, memsync.ErrNotFound) {
		t.Errorf("a missing memory: %v", err)
	}
	if _, err := db.ArchiveMemoryStore(ctx, sid, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateMemory(ctx, memsync.Write{StoreID: sid, MemoryID: m.ID, Content: &p, Actor: actor}); !errors.Is(err, memsync.ErrArchived) {
		t.Errorf("a write to an archived store: %v", err)
	}
}
