//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of a native call on this architecture.
const auditArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks a call made through the x32 ABI, which reports the same
// auditArch as native amd64 calls.
const x32Bit = 0x40000000

// Calls that only some architectures have.
const (
	sysMknod  = unix.SYS_MKNOD
	sysUselib = unix.SYS_USELIB
	sysSysctl = unix.SYS__SYSCTL
	sysIopl   = unix.SYS_IOPL
	sysIoperm = unix.SYS_IOPERM
)
