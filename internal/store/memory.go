package store

import (
	"context"
	"errors"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// Errors of memory writes; match them with errors.Is.
var (
	// ErrPrecondition: the memory's content is not the one the write
	// expected (its content_sha256 precondition).
	ErrPrecondition = errors.New("store: precondition failed")
	// ErrArchived: the object is archived and read-only.
	ErrArchived = errors.New("store: archived")
	// ErrLimit: the write would take the object over a limit.
	ErrLimit = errors.New("store: limit reached")
)

// PathConflictError is a memory write's path conflict
// (ma.MemoryPathConflict) as the store reports it: it matches
// ErrConflict.
type PathConflictError struct{ ma.MemoryPathConflict }

// Is makes a PathConflictError match ErrConflict.
func (e *PathConflictError) Is(target error) bool { return target == ErrConflict }

// MemoryStores stores memory stores, their memories and the versions that
// record every change of a memory. Memories and versions are scoped to
// ctx's workspace through their store (WithWorkspace).
//
// Every write of a store's memories runs in a transaction that locks the
// store's row: they are serialized per store, so that the path, count
// and precondition checks hold when the write commits.
type MemoryStores interface {
	CreateMemoryStore(ctx context.Context, m ma.MemoryStore) error
	GetMemoryStore(ctx context.Context, id string) (ma.MemoryStore, error)
	// UpdateMemoryStore reads the store, calls fn and writes it back,
	// atomically. An error from fn is returned as is.
	UpdateMemoryStore(ctx context.Context, id string, fn func(cur *ma.MemoryStore) error) (ma.MemoryStore, error)
	ListMemoryStores(ctx context.Context, q ListQuery) ([]Item[ma.MemoryStore], error)
	// ArchiveMemoryStore sets archived_at (once).
	ArchiveMemoryStore(ctx context.Context, id string, at time.Time) (ma.MemoryStore, error)
	// DeleteMemoryStore removes the store, its memories and versions.
	DeleteMemoryStore(ctx context.Context, id string) error

	// CreateMemory creates the memory w.MemoryID at *w.Path with
	// *w.Content, and its "created" version w.VersionID. It never
	// overwrites: a taken or overlapping path is a *PathConflictError.
	// ErrArchived when the store is archived, ErrLimit when it holds
	// ma.MaxMemoriesPerStore memories.
	CreateMemory(ctx context.Context, w MemoryWrite) (ma.Memory, error)
	// GetMemory returns a memory of the store, with its content.
	GetMemory(ctx context.Context, storeID, id string) (ma.Memory, error)
	// UpdateMemory changes the content (w.Content) and/or the path
	// (w.Path) of a memory and records a "modified" version w.VersionID.
	// A write that changes nothing records nothing and returns the
	// memory as it is, whatever w.IfSHA256; otherwise a w.IfSHA256 other
	// than the current content's is ErrPrecondition.
	UpdateMemory(ctx context.Context, w MemoryWrite) (ma.Memory, error)
	// DeleteMemory deletes a memory (ErrPrecondition if w.IfSHA256 is
	// set and not its content's) and records its "deleted" version
	// w.VersionID; its versions stay.
	DeleteMemory(ctx context.Context, w MemoryWrite) error
	// ListMemories lists a store's memories by path (see MemoryQuery).
	ListMemories(ctx context.Context, storeID string, q MemoryQuery) ([]MemoryItem, error)

	GetMemoryVersion(ctx context.Context, storeID, id string) (ma.MemoryVersion, error)
	// ListMemoryVersions lists a store's versions in the order they were
	// recorded (q.Desc: newest first), with q's filters.
	ListMemoryVersions(ctx context.Context, storeID string, q MemoryVersionQuery) ([]Item[ma.MemoryVersion], error)
	// RedactMemoryVersion clears a version's content, hash, size and
	// path and records who redacted it and when (once: redacting again
	// changes nothing).
	RedactMemoryVersion(ctx context.Context, storeID, id string, by *ma.Actor, at time.Time) (ma.MemoryVersion, error)
	// PruneMemoryVersions deletes, in every store, the versions recorded
	// before the time given that are not their memory's latest (a
	// memory's latest version is always kept, a deleted memory's too),
	// at most limit of them, and returns how many it deleted.
	PruneMemoryVersions(ctx context.Context, before time.Time, limit int) (int64, error)
}

// MemoryWrite is one change of a memory.
type MemoryWrite struct {
	StoreID  string
	MemoryID string
	// VersionID is the id of the version the change records.
	VersionID string
	// Path and Content are what the write sets (nil: unchanged; both
	// required on create).
	Path, Content *string
	// IfSHA256, if set, is the content_sha256 the memory must have.
	IfSHA256 string
	// Actor made the change (nil: not recorded).
	Actor *ma.Actor
	At    time.Time
}

// MemoryQuery lists the memories of a store in path order (bytewise).
type MemoryQuery struct {
	// Prefix keeps the paths that start with it ("" or ending with "/").
	Prefix string
	// Depth 1 lists the direct children of Prefix and rolls the deeper
	// memories up into one MemoryItem per child directory; 0 lists the
	// whole subtree.
	Depth int
	// After is the key (path) of the last item of the previous page.
	After string
	Limit int
	// Full reads the memories' content.
	Full bool
}

// MemoryItem is a listed memory, or (Memory nil) the directory Prefix
// (ending with "/") that rolls up deeper memories.
type MemoryItem struct {
	Memory *ma.Memory
	Prefix string
}

// Key is the item's position in the list order: its path.
func (it MemoryItem) Key() string {
	if it.Memory != nil {
		return it.Memory.Path
	}
	return it.Prefix
}

// MemoryVersionQuery filters a store's versions.
type MemoryVersionQuery struct {
	ListQuery
	MemoryID, Operation                   string
	SessionID, APIKeyID, ServiceAccountID string
	// Full reads the versions' content.
	Full bool
}
