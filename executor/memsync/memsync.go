// Package memsync keeps a memory store and a directory in step: the
// directory a session's tools see a store as (under /mnt/memory). Before
// a tool call, Pull brings what others wrote to the store into the
// directory; after it, Push turns what the call changed into memory
// versions by the session. When both sides changed a memory between two
// syncs, the store wins (as the official environment worker decides):
// its version is never lost, the directory's change is.
//
// The directory is written by a sandbox's hostile code: it is read and
// changed only through its root, without following links (package
// nofollow), and what is not a regular file, or breaks a rule of
// memories, is reported, never saved.
package memsync

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/nofollow"
)

// Owner is the user that the files a Dir writes are given to (the
// sandbox's user, so that its tools can change them).
type Owner struct{ UID, GID int }

// Dir is one memory store's directory in one session. Its methods are
// not safe for concurrent use.
type Dir struct {
	// StoreID is the memory store.
	StoreID string
	// Path is the host directory (it is created if missing).
	Path string
	// Mount is where the session sees it, for what Push reports.
	Mount string
	// ReadOnly: Push never writes to the store.
	ReadOnly bool
	// Owner, if set, is given the files and directories Pull makes.
	Owner *Owner
	// Actor is recorded on the versions Push writes.
	Actor ma.Actor

	// base is, per memory path, what the store and the directory last
	// agreed on.
	base map[string]entry
	// seen is the store's revision (its newest version's id) at the
	// last full pull; "" before the first.
	seen string
}

// entry is a memory as last synced: its id and content hash in the
// store, and the file's identity and times on disk then (a file whose
// stat still matches was not changed and is not read again).
type entry struct {
	id, sha string
	stat    fileStat
}

type fileStat struct {
	ino, size    int64
	mtime, ctime int64
}

// revision returns the id of the store's newest version ("none" for a
// store without any). Every change of a memory records a version, and
// the store serializes the writes of one store, so an unchanged revision
// is an unchanged store.
func (d *Dir) revision(ctx context.Context, st Store) (string, error) {
	v, err := st.NewestVersion(ctx, d.StoreID)
	if err != nil {
		return "", fmt.Errorf("read memory store %s: %w", d.StoreID, err)
	}
	if v == "" {
		return "none", nil
	}
	return v, nil
}

// remote lists the store's memories (without content) by path.
func (d *Dir) remote(ctx context.Context, st Store) (map[string]ma.Memory, error) {
	ms, err := st.ListMemories(ctx, d.StoreID)
	if err != nil {
		return nil, fmt.Errorf("list memory store %s: %w", d.StoreID, err)
	}
	out := make(map[string]ma.Memory, len(ms))
	for _, m := range ms {
		out[m.Path] = m
	}
	return out, nil
}

func (d *Dir) open() (*os.Root, error) {
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return nil, err
	}
	return os.OpenRoot(d.Path)
}

// rel is a memory path's name relative to the directory.
func rel(memPath string) string { return memPath[1:] }

// Pull brings the store's changes since the last sync into the
// directory (all of the store at the first): new and changed memories
// are written, deleted ones removed. A memory changed on both sides
// since takes the store's content. It returns how many files it wrote or
// removed. A store unchanged since the last pull costs one read.
func (d *Dir) Pull(ctx context.Context, st Store) (problems []string, err error) {
	rev, err := d.revision(ctx, st)
	if err != nil {
		return nil, err
	}
	if d.base != nil && rev == d.seen {
		return nil, nil
	}
	remote, err := d.remote(ctx, st)
	if err != nil {
		return nil, err
	}
	root, err := d.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fresh := d.base == nil
	if fresh {
		d.base = map[string]entry{}
	}
	dirs := &dirCache{root: root, owner: d.Owner, open: map[string]*os.Root{}}
	defer dirs.close()
	problems, err = d.apply(ctx, st, dirs, remote)
	if err == nil && fresh {
		problems = append(problems, d.prune(root, remote)...)
	}
	if err == nil && len(problems) == 0 {
		d.seen = rev // else the next pull tries again
	}
	return problems, err
}

// apply makes the directory what remote says the store holds. A file it
// cannot write or remove (the session put a directory in the way) is a
// problem, not an error.
func (d *Dir) apply(ctx context.Context, st Store, dirs *dirCache, remote map[string]ma.Memory) (problems []string, err error) {
	root := dirs.root
	for p, m := range remote {
		b, known := d.base[p]
		if known && b.sha == m.ContentSHA256 && b.id == m.ID {
			continue
		}
		if !known {
			if fi, sha, ok := d.same(root, p, m.ContentSHA256); ok {
				d.base[p] = entry{id: m.ID, sha: sha, stat: statOf(fi)}
				continue
			}
		}
		problem, err := d.write(ctx, st, dirs, m)
		if err != nil {
			return problems, err
		}
		if problem != "" {
			problems = append(problems, problem)
		}
	}
	for p := range d.base {
		if _, ok := remote[p]; ok {
			continue
		}
		delete(d.base, p)
		if err := root.Remove(rel(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("%s%s was deleted from the memory store but could not be removed here: %v.", d.Mount, p, err))
		}
	}
	return problems, nil
}

// prune removes the files the store does not hold, at a directory's first
// pull: a directory left from an earlier placement (before a restart, on
// another replica) may hold files whose memories were deleted since, and
// its own unsaved writes were cut off with the tool call that made them
// (the model was told it may or may not have run). The store is the
// truth.
func (d *Dir) prune(root *os.Root, remote map[string]ma.Memory) (problems []string) {
	var gone []string
	nofollow.Walk(root, walkBounds, func(_ *os.Root, _, p string, de fs.DirEntry) error {
		if !de.IsDir() {
			if _, ok := remote["/"+p]; !ok {
				gone = append(gone, p)
			}
		}
		return nil
	})
	for _, p := range gone {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("%s/%s is not in the memory store but could not be removed here: %v.", d.Mount, p, err))
		}
	}
	return problems
}

// same reports whether the file at memory path p has content sha (a
// directory's first look at a store whose files it holds already).
func (d *Dir) same(root *os.Root, p, sha string) (fs.FileInfo, string, bool) {
	content, fi, err := readRegular(root, rel(p))
	if err != nil {
		return nil, "", false
	}
	got := hash(content)
	return fi, got, got == sha
}

// write puts memory m's content at its path: into a new file beside it,
// then renamed over whatever is there (a link included, which is
// replaced, not followed).
func (d *Dir) write(ctx context.Context, st Store, dirs *dirCache, m ma.Memory) (problem string, err error) {
	full, err := st.GetMemory(ctx, d.StoreID, m.ID)
	if errors.Is(err, ErrNotFound) {
		return "", nil // deleted since the list: the next pull removes it
	}
	if err != nil {
		return "", fmt.Errorf("read memory %s: %w", m.Path, err)
	}
	if err := d.put(dirs, full); err != nil {
		return fmt.Sprintf("%s%s could not be brought up to date from the memory store: %v.", d.Mount, full.Path, err), nil
	}
	return "", nil
}

// put writes memory m's file.
func (d *Dir) put(dirs *dirCache, m ma.Memory) error {
	dir, name := path.Split(rel(m.Path))
	root, err := dirs.get(path.Clean(dir))
	if err != nil {
		return err
	}
	tmp := tempPrefix + rand.Text()
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, deref(m.Content))
	if err == nil && d.Owner != nil {
		err = f.Chown(d.Owner.UID, d.Owner.GID)
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return err
	}
	fi, err := root.Lstat(name)
	if err != nil {
		return err
	}
	d.base[m.Path] = entry{id: m.ID, sha: m.ContentSHA256, stat: statOf(fi)}
	return nil
}

// dirCache holds the directories of one pull open (a pull writes many
// files into few directories; opening each path from the root again
// would cost an openat per segment per file).
type dirCache struct {
	root  *os.Root
	owner *Owner
	open  map[string]*os.Root // by slash path from the root
}

// get returns the directory dir ("." for the root), made (and given to
// the owner) if missing, never through a link.
func (c *dirCache) get(dir string) (*os.Root, error) {
	if dir == "." {
		return c.root, nil
	}
	if r := c.open[dir]; r != nil {
		return r, nil
	}
	parent, err := c.get(path.Dir(dir))
	if err != nil {
		return nil, err
	}
	name := path.Base(dir)
	err = parent.Mkdir(name, 0o755)
	if err == nil && c.owner != nil {
		err = parent.Lchown(name, c.owner.UID, c.owner.GID)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("make directory %s: %w", dir, err)
	}
	r, err := nofollow.OpenDir(parent, name)
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", dir, err)
	}
	c.open[dir] = r
	return r, nil
}

func (c *dirCache) close() {
	for _, r := range c.open {
		r.Close()
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// readRegular reads name, a regular file of root, without following a
// link, up to one byte over the limit of a memory.
func readRegular(root *os.Root, name string) ([]byte, fs.FileInfo, error) {
	dir, base := path.Split(name)
	d := root
	if dir != "" {
		sub, err := nofollow.OpenDir(root, path.Clean(dir))
		if err != nil {
			return nil, nil, err
		}
		defer sub.Close()
		d = sub
	}
	info, err := d.Lstat(base)
	if err != nil {
		return nil, nil, err
	}
	return readOpen(d, base, info)
}

func readOpen(d *os.Root, name string, info fs.FileInfo) ([]byte, fs.FileInfo, error) {
	f, fi, err := nofollow.OpenRegular(d, name, info)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, ma.MaxMemoryContentBytes+1))
	return b, fi, err
}
