//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of a native call on this architecture.
const auditArch = unix.AUDIT_ARCH_AARCH64

// x32Bit is zero: arm64 has no second ABI that shares auditArch.
const x32Bit = 0

// Calls that only some architectures have; arm64 has none of these.
const (
	sysMknod  = absent
	sysUselib = absent
	sysSysctl = absent
	sysIopl   = absent
	sysIoperm = absent
)
