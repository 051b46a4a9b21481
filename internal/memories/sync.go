package memories

import (
	"context"
	"errors"
	"time"

	"github.com/reinsdev/reins/executor/memsync"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Memories is what SyncStore needs of the store.
type Memories interface {
	ListMemories(ctx context.Context, storeID string, q store.MemoryQuery) ([]store.MemoryItem, error)
	GetMemory(ctx context.Context, storeID, id string) (ma.Memory, error)
	CreateMemory(ctx context.Context, w store.MemoryWrite) (ma.Memory, error)
	UpdateMemory(ctx context.Context, w store.MemoryWrite) (ma.Memory, error)
	DeleteMemory(ctx context.Context, w store.MemoryWrite) error
	ListMemoryVersions(ctx context.Context, storeID string, q store.MemoryVersionQuery) ([]store.Item[ma.MemoryVersion], error)
}

// SyncStore returns st as the store of sessions' memory directories
// (package memsync) on the server: it names the memories and versions
// their writes make, and its errors match memsync's as well as the
// store's.
func SyncStore(st Memories) memsync.Store { return syncStore{st} }

type syncStore struct{ st Memories }

// listPage is how many memories one list read returns: a whole store.
const listPage = ma.MaxMemoriesPerStore + 1

func (s syncStore) ListMemories(ctx context.Context, storeID string) ([]ma.Memory, error) {
	var out []ma.Memory
	q := store.MemoryQuery{Limit: listPage}
	for {
		items, err := s.st.ListMemories(ctx, storeID, q)
		if err != nil {
			return nil, syncError(err)
		}
		for _, it := range items {
			if it.Memory != nil {
				out = append(out, *it.Memory)
			}
		}
		if len(items) < q.Limit {
			return out, nil
		}
		q.After = items[len(items)-1].Key()
	}
}

func (s syncStore) GetMemory(ctx context.Context, storeID, id string) (ma.Memory, error) {
	m, err := s.st.GetMemory(ctx, storeID, id)
	return m, syncError(err)
}

func (s syncStore) CreateMemory(ctx context.Context, w memsync.Write) (ma.Memory, error) {
	w.MemoryID = ids.New(ids.Memory)
	m, err := s.st.CreateMemory(ctx, storeWrite(w))
	return m, syncError(err)
}

func (s syncStore) UpdateMemory(ctx context.Context, w memsync.Write) (ma.Memory, error) {
	m, err := s.st.UpdateMemory(ctx, storeWrite(w))
	return m, syncError(err)
}

func (s syncStore) DeleteMemory(ctx context.Context, w memsync.Write) error {
	return syncError(s.st.DeleteMemory(ctx, storeWrite(w)))
}

func (s syncStore) NewestVersion(ctx context.Context, storeID string) (string, error) {
	vs, err := s.st.ListMemoryVersions(ctx, storeID, store.MemoryVersionQuery{ListQuery: store.ListQuery{Desc: true, Limit: 1}})
	if err != nil || len(vs) == 0 {
		return "", syncError(err)
	}
	return vs[0].Value.ID, nil
}

// storeWrite is w as the store takes it, with a new version.
func storeWrite(w memsync.Write) store.MemoryWrite {
	return store.MemoryWrite{StoreID: w.StoreID, MemoryID: w.MemoryID, VersionID: ids.New(ids.MemoryVersion),
		Path: w.Path, Content: w.Content, IfSHA256: w.IfSHA256, Actor: w.Actor, At: time.Now()}
}

// syncError is the store's error err as memsync's: it matches both
// memsync's error and the store's, and says what err says.
func syncError(err error) error {
	var conflict *store.PathConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &conflict):
		return &bothError{err, &conflict.MemoryPathConflict}
	case errors.Is(err, store.ErrNotFound):
		return &bothError{err, memsync.ErrNotFound}
	case errors.Is(err, store.ErrPrecondition):
		return &bothError{err, memsync.ErrPrecondition}
	case errors.Is(err, store.ErrArchived):
		return &bothError{err, memsync.ErrArchived}
	case errors.Is(err, store.ErrLimit):
		return &bothError{err, memsync.ErrLimit}
	}
	return err
}

// bothError is a store error that matches a memsync error too.
type bothError struct{ err, memsync error }

func (e *bothError) Error() string   { return e.err.Error() }
func (e *bothError) Unwrap() []error { return []error{e.err, e.memsync} }
