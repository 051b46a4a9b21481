// Package nofollow reads and changes directory trees that a sandbox can
// write to (a session's workspace) on the server's behalf, without
// following anything the sandbox put there: a symbolic link is never
// followed, a directory is entered only if it is still the directory that
// was listed, and only regular files are opened, without blocking (a FIFO
// put in a file's place cannot stall the server).
//
// Everything goes through an [os.Root], so nothing outside the tree is
// reached even by a path the sandbox changes while it is being walked.
// The identity checks on top of it (the entry listed or looked at is the
// one opened) make "beneath the root" into "exactly this entry": a link
// to another place inside the tree is not followed either.
package nofollow

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Refusals, wrapped in the errors of OpenDir and OpenRegular.
var (
	// ErrLink: the entry is a symbolic link.
	ErrLink = errors.New("a symbolic link")
	// ErrNotRegular: the entry is not a regular file (a directory, a
	// FIFO, a socket, a device).
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotDir: the entry is not a directory.
	ErrNotDir = errors.New("not a directory")
	// ErrChanged: the entry was replaced between the look and the open.
	ErrChanged = errors.New("replaced while it was opened")
)

// ErrBounds is returned by Walk when it stopped at one of its bounds.
var ErrBounds = errors.New("the tree is over the walk's bounds")

// OpenDir opens the directory at name, a slash-separated path relative
// to root, refusing a symbolic link or anything but a directory at any of
// its elements.
func OpenDir(root *os.Root, name string) (*os.Root, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	dir, err := root.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	if name == "." {
		return dir, nil
	}
	for _, elem := range strings.Split(name, "/") {
		sub, err := openSubdir(dir, elem, nil)
		dir.Close()
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		dir = sub
	}
	return dir, nil
}

// openSubdir opens the directory name, an entry of dir that Lstat
// described as info (nil: looked at first).
func openSubdir(dir *os.Root, name string, info fs.FileInfo) (*os.Root, error) {
	info, err := lstat(dir, name, info)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, ErrNotDir
	}
	sub, err := dir.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	// os.Root follows a link that stays inside dir: if name became one
	// since the look, what was opened is another directory.
	if got, err := sub.Stat("."); err != nil || !os.SameFile(info, got) {
		sub.Close()
		return nil, errors.Join(ErrChanged, err)
	}
	return sub, nil
}

// lstat returns info, or else what Lstat says of name in dir, refusing a
// symbolic link.
func lstat(dir *os.Root, name string, info fs.FileInfo) (fs.FileInfo, error) {
	if info == nil {
		var err error
		if info, err = dir.Lstat(name); err != nil {
			return nil, err
		}
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil, ErrLink
	}
	return info, nil
}

// OpenRegular opens name, an entry of dir that Lstat described as info
// (nil: looked at first), for reading. It refuses a symbolic link and
// anything but a regular file, and opens without waiting: a FIFO, or a
// device, put in the file's place after the look is refused, never read.
// It returns the open file's own Stat.
func OpenRegular(dir *os.Root, name string, info fs.FileInfo) (*os.File, fs.FileInfo, error) {
	info, err := lstat(dir, name, info)
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, ErrNotRegular
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	got, err := f.Stat()
	switch {
	case err != nil:
	case !got.Mode().IsRegular():
		err = ErrNotRegular
	case !os.SameFile(info, got):
		err = ErrChanged
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, got, nil
}

// Bounds bound a walk. Zero fields are no bound.
type Bounds struct {
	// Entries is how many entries (files, directories, links, …) the
	// walk visits.
	Entries int
	// Depth is how deep below the root the walk descends: 1 visits the
	// root's entries only. A walk keeps two descriptors open per level.
	Depth int
}

// WalkFunc is called for each entry of a tree: dir is the directory that
// holds it, name its name there, and p its slash-separated path from the
// root of the walk; d.Info is what Lstat says of it. Returning
// [fs.SkipDir] for a directory skips what is under it, and [fs.SkipAll]
// ends the walk; any other error ends the walk and is Walk's.
type WalkFunc func(dir *os.Root, name, p string, d fs.DirEntry) error

// listBatch is how many entries one read of a directory returns.
const listBatch = 256

// Walk calls fn for every entry of the tree under root (depth first,
// each directory's entries in the order the file system lists them), and
// enters the directories among them that are still the directories
// listed when they are opened: never a symbolic link, never a directory
// swapped in after the listing. It returns ErrBounds when it stopped at
// one of b's bounds, after visiting what was within them.
func Walk(root *os.Root, b Bounds, fn WalkFunc) error {
	w := &walker{b: b, fn: fn}
	err := w.dir(root, ".", 1)
	if errors.Is(err, fs.SkipAll) {
		err = nil
	}
	if err == nil && w.over {
		err = ErrBounds
	}
	return err
}

// walker is one walk.
type walker struct {
	b       Bounds
	fn      WalkFunc
	entries int
	over    bool // a bound was met
}

// dir visits the entries of dir, whose path is p, at the given depth.
func (w *walker) dir(dir *os.Root, p string, depth int) error {
	f, err := dir.Open(".")
	if err != nil {
		return nil // unreadable: skipped, as a file that went away
	}
	defer f.Close()
	for {
		batch, err := f.ReadDir(listBatch)
		for _, d := range batch {
			if err := w.entry(dir, p, d, depth); err != nil {
				return err
			}
		}
		if err != nil || len(batch) == 0 {
			if err == io.EOF {
				err = nil
			}
			return nil
		}
	}
}

// entry visits d, an entry of dir (whose path is p), and the tree under
// it.
func (w *walker) entry(dir *os.Root, p string, d fs.DirEntry, depth int) error {
	if w.b.Entries > 0 && w.entries >= w.b.Entries {
		w.over = true
		return fs.SkipAll
	}
	w.entries++
	name := d.Name()
	sp := path.Join(p, name)
	err := w.fn(dir, name, sp, d)
	switch {
	case errors.Is(err, fs.SkipDir):
		return nil
	case err != nil:
		return err
	case !d.IsDir():
		return nil
	case w.b.Depth > 0 && depth >= w.b.Depth:
		w.over = true
		return nil
	}
	info, err := d.Info()
	if err != nil {
		return nil // gone since the listing
	}
	sub, err := openSubdir(dir, name, info)
	if err != nil {
		return nil // replaced since the listing: not entered
	}
	defer sub.Close()
	return w.dir(sub, sp, depth+1)
}
