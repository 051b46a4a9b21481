//go:build linux && (amd64 || arm64)

package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data. Both supported architectures are
// little-endian, so the low 32 bits of an argument come first.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// maxInsns is the kernel's limit on the length of a BPF program
// (BPF_MAXINSNS).
const maxInsns = 4096

// Install sets no_new_privs and installs the sandbox's seccomp filter on the
// calling OS thread. The filter stays for the life of the thread and is
// inherited by every process it starts, through execve.
//
// Other threads of the process are not filtered, so the caller must have
// locked its goroutine to its thread (runtime.LockOSThread) and must start or
// exec the sandboxed program from that same goroutine.
func Install() error {
	prog, err := program()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// Flags 0: this thread only, no TSYNC.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: install filter: %w", errno)
	}
	return nil
}

// program builds the filter: the architecture check, on amd64 the x32 check,
// then one block per rule, and allow for everything else.
func program() ([]unix.SockFilter, error) {
	p := []unix.SockFilter{
		load(offArch),
		jeq(auditArch, 1, 0),
		ret(unix.SECCOMP_RET_KILL_PROCESS),
		load(offNr),
	}
	if x32Bit != 0 {
		p = append(p,
			jset(x32Bit, 0, 1),
			ret(errnoRet(unix.ENOSYS)),
		)
	}
	for _, r := range rules() {
		if r.nr == absent {
			continue
		}
		b, err := r.compile()
		if err != nil {
			return nil, err
		}
		p = append(p, b...)
	}
	p = append(p, ret(unix.SECCOMP_RET_ALLOW))
	if len(p) > maxInsns {
		return nil, fmt.Errorf("seccomp: program has %d instructions, the kernel takes at most %d", len(p), maxInsns)
	}
	return p, nil
}

// compile returns the rule's block. It expects the syscall number in the
// accumulator and leaves it there when the number does not match; when it
// does, every path through the block returns.
func (r rule) compile() ([]unix.SockFilter, error) {
	body, err := r.when.compile(errnoRet(r.errno))
	if err != nil {
		return nil, fmt.Errorf("seccomp: rule %s: %w", r.name, err)
	}
	if len(body) > 255 {
		return nil, fmt.Errorf("seccomp: rule %s: %d instructions do not fit one jump", r.name, len(body))
	}
	return append([]unix.SockFilter{jeq(uint32(r.nr), 0, uint8(len(body)))}, body...), nil
}

// compile returns instructions that return deny for a matching call and
// allow for any other.
func (m argMatch) compile(deny uint32) ([]unix.SockFilter, error) {
	if m.op == always {
		return []unix.SockFilter{ret(deny)}, nil
	}
	if m.arg < 0 || m.arg > 5 {
		return nil, fmt.Errorf("argument %d does not exist", m.arg)
	}
	p := []unix.SockFilter{load(uint32(offArgs + 8*m.arg))}
	switch m.op {
	case anyBit:
		return append(p, jset(m.mask, 0, 1), ret(deny), ret(unix.SECCOMP_RET_ALLOW)), nil
	case oneOf, noneOf:
		if m.mask != allBits {
			p = append(p, and(m.mask))
		}
		n := len(m.values)
		if n == 0 || n > 254 {
			return nil, fmt.Errorf("%d values to compare", n)
		}
		for i, v := range m.values {
			p = append(p, jeq(v, uint8(n-i), 0)) // to the last instruction
		}
		if m.op == oneOf {
			return append(p, ret(unix.SECCOMP_RET_ALLOW), ret(deny)), nil
		}
		return append(p, ret(deny), ret(unix.SECCOMP_RET_ALLOW)), nil
	}
	return nil, fmt.Errorf("unknown match op %d", m.op)
}

// errnoRet is the filter's return value that fails a call with errno.
func errnoRet(errno unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA
}

// load loads the 32-bit word at off in seccomp_data into the accumulator.
func load(off uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
}

// jeq jumps jt instructions ahead if the accumulator equals k, else jf.
func jeq(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
}

// jset jumps jt instructions ahead if the accumulator shares a bit with k,
// else jf.
func jset(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: k, Jt: jt, Jf: jf}
}

// and ANDs the accumulator with k.
func and(k uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: k}
}

// ret ends the program with the value k.
func ret(k uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k}
}
