package app

import (
	"errors"
	"fmt"
	"io"
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
	f *os.File
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
	info := fmt.Sprintf("pid %d, started %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(info), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
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

// LockDataDir takes the data dir's lock as New does, for the offline
// commands (restore, master-key rotation) that must not run beside a
// server on the same data dir: it fails with ErrDataDirInUse, naming the
// holder, while one runs. The returned func releases the lock.
func LockDataDir(dir string) (release func() error, err error) {
	l, err := lockDataDir(dir)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
