package tools

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The file tools act on regular files only. Bash can leave anything in the
// workspace: a FIFO that blocks whoever opens or reads it, a socket, a
// device that streams without end. So every file is opened without
// blocking, its type is checked with fstat on the open file (a check
// before the open could be raced by a rename), and every read is bounded.

// openRegular opens rel inside the workspace and returns it with its
// fstat information, or refuses with code "invalid_input" if it is not a
// regular file. Symbolic links are followed as far as they stay inside the
// workspace. A FIFO is opened without waiting for a peer, and never becomes
// the server's controlling terminal if it is a terminal.
func (w *Workspace) openRegular(rel string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := w.root.OpenFile(rel, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if err != nil {
		return nil, nil, w.openError(rel, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(rel, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, fsError(rel, err)
	}
	return f, fi, nil
}

// openError explains why opening rel failed. Opening a socket, or a FIFO
// for writing with no reader, fails with ENXIO, and a directory opened
// for writing with EISDIR: the refusal is then worded by what rel is.
func (w *Workspace) openError(rel string, err error) error {
	if errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.EISDIR) || errors.Is(err, fs.ErrPermission) {
		if fi, serr := w.root.Stat(rel); serr == nil && !fi.Mode().IsRegular() {
			return notRegular(rel, fi.Mode())
		}
	}
	return fsError(rel, err)
}

// notRegular is the refusal of a file of the given mode.
func notRegular(rel string, mode fs.FileMode) error {
	if mode.IsDir() {
		return errorf(CodeInvalidInput, "%s is a directory", display(rel))
	}
	return errorf(CodeInvalidInput, "%s is %s, not a regular file; the file tools only act on regular files", display(rel), kind(mode))
}

// display names the workspace path rel in a message.
func display(rel string) string {
	if rel == "." {
		return "the workspace root"
	}
	return filepath.ToSlash(rel)
}

// kind names the type of a file that is not regular.
func kind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		return "a unix socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case mode.IsDir():
		return "a directory"
	}
	return "a special file"
}

// readRegular reads the regular file rel whole, refusing it if it is over
// limit bytes.
func (w *Workspace) readRegular(rel string, limit int64) ([]byte, error) {
	f, fi, err := w.openRegular(rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, fi, rel, limit)
}

// readAll reads the open regular file rel, with fstat information fi,
// refusing it if it is over limit bytes.
func readAll(f *os.File, fi fs.FileInfo, rel string, limit int64) ([]byte, error) {
	data, err := readAtMost(f, fi.Size(), limit)
	if errors.Is(err, errOverLimit) {
		return nil, errorf(CodeInvalidInput, "%s is larger than the %d byte limit of the file tools", display(rel), limit)
	}
	if err != nil {
		return nil, fsError(rel, err)
	}
	return data, nil
}

// errOverLimit is the failure of a read of a file over its limit.
var errOverLimit = errors.New("file over the limit")

// readAtMost reads r, a file fstat says is size bytes long, to its end,
// failing with errOverLimit rather than reading more than limit bytes: a
// file may grow after its fstat, and some never end.
func readAtMost(r io.Reader, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, errOverLimit
	}
	var b bytes.Buffer
	b.Grow(int(max(size, 0)) + 1)
	if _, err := b.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, err
	}
	if int64(b.Len()) > limit {
		return nil, errOverLimit
	}
	return b.Bytes(), nil
}

// create opens rel for writing, creating it if it does not exist and then
// giving it to the Owner. A symbolic link is followed to an existing file
// only, never used to create one.
func (w *Workspace) create(rel string) (*os.File, error) {
	f, _, err := w.openRegular(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		f, _, err = w.openRegular(rel, os.O_WRONLY, 0)
		return f, err
	}
	if err != nil {
		return nil, err
	}
	if o := w.opts.Owner; o != nil {
		if err := f.Chown(o.UID, o.GID); err != nil {
			f.Close()
			return nil, fsError(rel, err)
		}
	}
	return f, nil
}

// mkdirAll creates the directory rel and its missing parents inside the
// workspace, giving each one it creates to the Owner.
func (w *Workspace) mkdirAll(rel string) error {
	if rel == "." {
		return nil
	}
	p := ""
	for _, seg := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, seg)
		err := w.root.Mkdir(p, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil && w.opts.Owner != nil {
			err = w.root.Lchown(p, w.opts.Owner.UID, w.opts.Owner.GID)
		}
		if err != nil {
			return fsError(p, err)
		}
	}
	return nil
}
