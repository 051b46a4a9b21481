package app

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile is the lock file's name inside the data dir. The App that holds
// an exclusive flock on it owns the data dir; the file names the holder's
// pid and start time.
const LockFile = "reins.lock"

// ErrDataDirInUse is returned, wrapped, by New when another App (in this
// process or another) holds the data dir.
var ErrDataDirInUse = errors.New("data dir is in use")

// dataDirInUseError says which process holds a data dir.
type dataDirInUseError struct {
	dir    string
	holder string // "pid 1234, started …", or "" when the lock file says nothing
}

func (e *dataDirInUseError) Error() string {
	holder := ""
	if e.holder != "" {
		holder = " (" + e.holder + ")"
	}
	return fmt.Sprintf("data dir %s is in use by another reins serve%s; stop it or use another --data-dir", e.dir, holder)
}

func (e *dataDirInUseError) Unwrap() error { return ErrDataDirInUse }

// dirLock is an exclusive flock on the data dir's lock file. The kernel
// releases it when its file is closed or the process dies, SIGKILL
// included, so a crash never leaves a stale lock.
type dirLock struct {
	f    *os.File
	info string // the holder line: pid and start time
}

// lockDataDir takes the data dir's lock without waiting and records this
// process's pid and start time in it. It fails with ErrDataDirInUse when
// another holder has it.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	// os.OpenFile sets O_CLOEXEC: the lock is not inherited by children
	// (sandboxes, tools), which would keep it after the server died.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &dataDirInUseError{dir: dir, holder: holder}
		}
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	// A start that failed before New removes the lock file it created
	// (DataDirLock.Release): a file locked after its removal is not the
	// lock, so take it again from the path.
	if !samePath(f, path) {
		f.Close()
		return lockDataDir(dir)
	}
	l := &dirLock{f: f, info: fmt.Sprintf("pid %d, started %s", os.Getpid(), time.Now().UTC().Format(time.RFC3339))}
	if err := l.write(l.info); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	return l, nil
}

// samePath reports whether f is still the file at path.
func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// write replaces the lock file's holder line with line.
func (l *dirLock) write(line string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(line+"\n"), 0)
	return err
}

// readHolder returns the holder line of a lock file, or "" when it has
// none (e.g. the holder is between taking the lock and writing it).
func readHolder(f *os.File) string {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 256))
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if !strings.HasPrefix(line, "pid ") {
		return ""
	}
	return strings.TrimSpace(line)
}

// release unlocks the data dir. It may be called more than once.
func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	// Closing the file releases the flock; the file stays for the next
	// holder to overwrite.
	if err := f.Close(); err != nil {
		return fmt.Errorf("data dir lock: %w", err)
	}
	return nil
}

// DataDirLock is a data dir's lock taken before New, so that a server can
// name the process holding its data dir before it binds its port (where
// it would otherwise fail with "address already in use" when both ask for
// the same one). New adopts it through Config.DataDirLock.
type DataDirLock struct {
	l *dirLock // nil once released or adopted by New
	// created are the data dir and lock file LockDataDir created, removed
	// by Release so that a start refused before New leaves nothing.
	created []string
}

// LockDataDir creates the data dir if needed and takes its lock without
// waiting; it fails with ErrDataDirInUse, naming the holder, when another
// process or App has it. `reins serve` takes it before binding its port;
// the offline commands (restore, master-key rotation) take it so that they
// never run beside a server on the same data dir.
func LockDataDir(dir string) (*DataDirLock, error) {
	var created []string
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		created = append(created, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		created = append(created, path)
	}
	l, err := lockDataDir(dir)
	if err != nil {
		return nil, err
	}
	return &DataDirLock{l: l, created: created}, nil
}

// SetURL records in the lock file the URL the holder serves, so that a
// second server on the same data dir names it.
func (d *DataDirLock) SetURL(url string) error {
	if d == nil || d.l == nil {
		return nil
	}
	if err := d.l.write(d.l.info + ", serving " + url); err != nil {
		return fmt.Errorf("data dir lock: %w", err)
	}
	return nil
}

// Release unlocks the data dir unless New adopted the lock (then Shutdown
// releases it). It may be called more than once.
func (d *DataDirLock) Release() error {
	if d == nil {
		return nil
	}
	l := d.l
	d.l = nil
	if l == nil {
		return nil
	}
	// Removed while still locked: another start that opened the file
	// meanwhile finds it is not the path's any more (lockDataDir).
	for i := len(d.created) - 1; i >= 0; i-- {
		os.Remove(d.created[i]) // the dir only if it is empty
	}
	return l.release()
}

// take returns the lock New holds: the one the caller took, adopted, or
// a new one.
func (d *DataDirLock) take(dir string) (*dirLock, error) {
	if d == nil || d.l == nil {
		return lockDataDir(dir)
	}
	l := d.l
	d.l = nil
	return l, nil
}
