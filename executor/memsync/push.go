package memsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/nofollow"
)

// walkBounds bound Push's walk of a directory: a store holds at most
// MaxMemoriesPerStore memories, each at most MaxSegments deep.
var walkBounds = nofollow.Bounds{Entries: 4 * ma.MaxMemoriesPerStore, Depth: ma.MaxMemoryPathSegments}

// Push records what changed in the directory since the last sync as
// versions by d.Actor: new files are created, changed ones modified,
// removed ones deleted. A file the store changed meanwhile is left to the
// next Pull (the store wins). What cannot be saved (not a regular file,
// too large, not UTF-8, an invalid path, a full store) is left out and
// described in problems, one sentence each, for the model. A read-only
// directory pushes nothing.
func (d *Dir) Push(ctx context.Context, st Store) (problems []string, err error) {
	if d.ReadOnly {
		return nil, nil
	}
	root, err := d.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if d.base == nil {
		d.base = map[string]entry{}
	}
	seen := map[string]bool{}
	err = nofollow.Walk(root, walkBounds, func(dir *os.Root, name, p string, de fs.DirEntry) error {
		memPath := "/" + p
		if de.IsDir() {
			return nil
		}
		seen[memPath] = true
		problem, err := d.pushEntry(ctx, st, dir, name, memPath, de)
		if problem != "" {
			problems = append(problems, problem)
		}
		return err
	})
	if errors.Is(err, nofollow.ErrBounds) {
		problems = append(problems, fmt.Sprintf("%s holds more files or deeper directories than a memory store can (%d memories, %d levels): what lies beyond was not saved.", d.Mount, ma.MaxMemoriesPerStore, ma.MaxMemoryPathSegments))
		err = nil
	}
	if err != nil {
		return problems, err
	}
	for p, b := range d.base {
		if seen[p] {
			continue
		}
		if err := d.remove(ctx, st, p, b); err != nil {
			return problems, err
		}
	}
	return problems, nil
}

// pushEntry pushes one entry of the walk, a file at memory path memPath.
func (d *Dir) pushEntry(ctx context.Context, st Store, dir *os.Root, name, memPath string, de fs.DirEntry) (string, error) {
	shown := d.Mount + memPath
	info, err := de.Info()
	if err != nil {
		return "", nil // gone since the listing
	}
	if !info.Mode().IsRegular() {
		return fmt.Sprintf("%s is not a regular file (%s): only files are saved to the memory store.", shown, info.Mode().Type()), nil
	}
	b, known := d.base[memPath]
	if known && b.stat == statOf(info) {
		return "", nil
	}
	if isTemp(name) {
		return "", nil
	}
	content, fi, err := readOpen(dir, name, info)
	if err != nil {
		return "", nil // replaced while read: the next push sees it
	}
	sha := hash(content)
	if known && b.sha == sha {
		b.stat = statOf(fi)
		d.base[memPath] = b
		return "", nil
	}
	if err := ma.CheckMemoryPath(memPath); err != nil {
		return fmt.Sprintf("%s was not saved to the memory store: its path %s.", shown, err), nil
	}
	if len(content) > ma.MaxMemoryContentBytes {
		return fmt.Sprintf("%s was not saved to the memory store: it is over the limit of a memory (%d bytes, 100 kB); it stays in this session's copy only. Split it into smaller files.", shown, ma.MaxMemoryContentBytes), nil
	}
	if err := ma.CheckMemoryContent(string(content)); err != nil {
		return fmt.Sprintf("%s was not saved to the memory store: its content %s.", shown, err), nil
	}
	return d.save(ctx, st, memPath, string(content), sha, fi)
}

// save writes one changed or new file to the store.
func (d *Dir) save(ctx context.Context, st Store, memPath, content, sha string, fi fs.FileInfo) (string, error) {
	shown := d.Mount + memPath
	actor := d.Actor
	w := Write{StoreID: d.StoreID, Content: &content, Actor: &actor}
	b, known := d.base[memPath]
	var err error
	var m ma.Memory
	if known {
		w.MemoryID, w.IfSHA256 = b.id, b.sha
		m, err = st.UpdateMemory(ctx, w)
	} else {
		w.Path = &memPath
		m, err = st.CreateMemory(ctx, w)
	}
	var conflict *PathConflictError
	switch {
	case err == nil:
		// The store names a new memory.
		d.base[memPath] = entry{id: m.ID, sha: sha, stat: statOf(fi)}
		return "", nil
	case errors.Is(err, ErrPrecondition), errors.Is(err, ErrNotFound), errors.As(err, &conflict) && conflict.MemoryPath == memPath:
		// Changed in the store meanwhile: the store wins at the next pull.
		return "", nil
	case errors.As(err, &conflict):
		return fmt.Sprintf("%s was not saved to the memory store: the memory %s is in the way (a path cannot be both a file and a directory).", shown, conflict.MemoryPath), nil
	case errors.Is(err, ErrLimit):
		return fmt.Sprintf("%s was not saved to the memory store: the store holds its maximum of %d memories. Delete or merge some first.", shown, ma.MaxMemoriesPerStore), nil
	case errors.Is(err, ErrArchived):
		return fmt.Sprintf("%s was not saved: the memory store is archived (read-only).", shown), nil
	}
	return "", fmt.Errorf("save %s: %w", memPath, err)
}

// remove deletes the memory whose file is gone, unless the store changed
// it meanwhile (then the next pull brings it back).
func (d *Dir) remove(ctx context.Context, st Store, memPath string, b entry) error {
	actor := d.Actor
	err := st.DeleteMemory(ctx, Write{StoreID: d.StoreID, MemoryID: b.id, IfSHA256: b.sha, Actor: &actor})
	switch {
	case err == nil, errors.Is(err, ErrNotFound):
		delete(d.base, memPath)
		return nil
	case errors.Is(err, ErrPrecondition):
		delete(d.base, memPath) // changed in the store: the next pull writes it back
		return nil
	case errors.Is(err, ErrArchived):
		return nil
	}
	return fmt.Errorf("delete %s: %w", memPath, err)
}

// isTemp reports whether name is one of Pull's files being written.
func isTemp(name string) bool {
	return len(name) > len(tempPrefix) && name[:len(tempPrefix)] == tempPrefix
}

const tempPrefix = ".reins-memory-"
