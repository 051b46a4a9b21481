//go:build linux

// Package landlockrule builds the Landlock rulesets that confine tool
// processes, on the host (package tools) and inside sandboxes.
package landlockrule

import (
	"os"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// FileRights are the rights that apply to a file (not a directory).
const FileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev

// Rights returns every file system right the Landlock ABI abi handles.
func Rights(abi int) uint64 {
	r := uint64(1<<13 - 1) // ABI 1: execute … make_sym
	if abi >= 2 {
		r |= ll.AccessFSRefer
	}
	if abi >= 3 {
		r |= ll.AccessFSTruncate
	}
	if abi >= 5 {
		r |= ll.AccessFSIoctlDev
	}
	return r
}

// Add grants access (within handled) beneath path in the ruleset fd;
// only FileRights when path is a file. A missing path is an
// *os.PathError wrapping ENOENT.
func Add(fd int, path string, access, handled uint64) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= FileRights
	}
	return ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: access & handled, ParentFd: pfd}, 0)
}
