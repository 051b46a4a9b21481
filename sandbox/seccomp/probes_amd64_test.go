//go:build linux

package seccomp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// archProbes returns the probes of calls that only amd64 has.
func archProbes() []probe {
	return []probe{
		{name: "mknod(S_IFCHR)", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			return mknod(d+"/missing/c", unix.S_IFCHR|0o600, unix.Mkdev(1, 3))
		}},
		{name: "mknod(S_IFIFO)", call: func(d string) error {
			return mknod(d+"/fifo-mknod", unix.S_IFIFO|0o600, 0)
		}},
		{name: "iopl", filtered: unix.EPERM, unfiltered: unix.EINVAL, optional: true, call: func(string) error {
			_, _, errno := unix.Syscall(unix.SYS_IOPL, 4, 0, 0)
			return errnoOrNil(errno)
		}},
	}
}

// mknod calls mknod(2) with a full 64-bit mode argument.
func mknod(path string, mode, dev uint64) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_MKNOD, uintptr(unsafe.Pointer(p)), uintptr(mode), uintptr(dev))
	return errnoOrNil(errno)
}
