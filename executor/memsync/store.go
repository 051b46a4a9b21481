package memsync

import (
	"context"
	"errors"

	ma "github.com/reinsdev/reins/managedagents"
)

// Store is what a Dir needs of a memory store: the server's store in the
// process that holds it, or its memory endpoints over HTTP (HTTPStore).
// Its errors match this package's: ErrNotFound, ErrPrecondition,
// ErrArchived, ErrLimit and *PathConflictError.
type Store interface {
	// ListMemories returns every memory of the store, without content.
	ListMemories(ctx context.Context, storeID string) ([]ma.Memory, error)
	// GetMemory returns a memory of the store, with its content.
	GetMemory(ctx context.Context, storeID, id string) (ma.Memory, error)
	// CreateMemory creates a memory at *w.Path with *w.Content (the
	// store names it); a taken or overlapping path is a
	// *PathConflictError.
	CreateMemory(ctx context.Context, w Write) (ma.Memory, error)
	// UpdateMemory changes the content of memory w.MemoryID.
	UpdateMemory(ctx context.Context, w Write) (ma.Memory, error)
	// DeleteMemory deletes memory w.MemoryID.
	DeleteMemory(ctx context.Context, w Write) error
	// NewestVersion returns the id of the store's newest memory version,
	// "" when it has none.
	NewestVersion(ctx context.Context, storeID string) (string, error)
}

// Write is one change of a memory, recorded as a version by Actor.
type Write struct {
	StoreID string
	// MemoryID is the memory changed ("" on create).
	MemoryID string
	// Path and Content are what the write sets (nil: unchanged; both set
	// on create).
	Path, Content *string
	// IfSHA256, if set, is the content_sha256 the memory must have, or
	// the write fails with ErrPrecondition.
	IfSHA256 string
	// Actor made the change.
	Actor *ma.Actor
}

// Errors of a Store; match them with errors.Is.
var (
	// ErrNotFound: the memory store or the memory does not exist.
	ErrNotFound = errors.New("memsync: not found")
	// ErrPrecondition: the memory's content is not the one the write
	// expected (Write.IfSHA256).
	ErrPrecondition = errors.New("memsync: precondition failed")
	// ErrArchived: the memory store is archived and read-only.
	ErrArchived = errors.New("memsync: memory store archived")
	// ErrLimit: the memory store holds ma.MaxMemoriesPerStore memories.
	ErrLimit = errors.New("memsync: memory store full")
)

// PathConflictError is the error of a write whose path is taken, or
// overlaps another memory's.
type PathConflictError = ma.MemoryPathConflict
