//go:build linux && (amd64 || arm64)

package seccomp

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probe is one system call that the child process makes on its filtered
// thread, with the errno the parent expects with and without the filter
// (0 for success).
type probe struct {
	name       string
	call       func(dir string) error
	filtered   unix.Errno
	unfiltered unix.Errno
	// privileged marks probes whose unfiltered result needs root's
	// capabilities; without them the kernel says EPERM itself.
	privileged bool
	// optional marks calls that a kernel may be built without (modules,
	// I/O ports); without the filter they may then fail with ENOSYS.
	optional bool
}

// Calls are built so that, without the filter, the kernel fails them
// harmlessly with an errno other than EPERM (a missing path, a bad file
// descriptor, contradictory flags), so that each EPERM expectation can fail:
// the control child, run without the filter, checks that.

// probes returns the probes common to both architectures, then archProbes.
func probes() []probe {
	p := []probe{
		{name: "mount", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			return unix.Mount("none", d+"/missing/m", "tmpfs", 0, "")
		}},
		{name: "umount2", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			return unix.Unmount(d+"/missing/m", 0)
		}},
		{name: "pivot_root", filtered: unix.EPERM, unfiltered: unix.ENOENT, privileged: true, call: func(d string) error {
			return unix.PivotRoot(d+"/missing/a", d+"/missing/b")
		}},
		{name: "chroot", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			return unix.Chroot(d + "/missing/r")
		}},
		{name: "open_tree", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			_, err := unix.OpenTree(unix.AT_FDCWD, d+"/missing/t", 0)
			return err
		}},
		{name: "fsopen", filtered: unix.EPERM, unfiltered: unix.ENODEV, privileged: true, call: func(string) error {
			_, err := unix.Fsopen("reins-no-such-fs", 0)
			return err
		}},
		{name: "setns", filtered: unix.EPERM, unfiltered: unix.EBADF, call: func(string) error {
			return unix.Setns(-1, 0)
		}},
		// A Go process has many threads, and the kernel refuses a new user
		// namespace to a multithreaded process with EINVAL.
		{name: "unshare(CLONE_NEWUSER)", filtered: unix.EPERM, unfiltered: unix.EINVAL, call: func(string) error {
			return unix.Unshare(unix.CLONE_NEWUSER)
		}},
		// CLONE_NEWUSER with CLONE_FS is refused by the kernel, so the call
		// can never fork this Go process.
		{name: "clone(CLONE_NEWUSER|CLONE_FS|SIGCHLD)", filtered: unix.EPERM, unfiltered: unix.EINVAL, call: func(string) error {
			return clone(unix.CLONE_NEWUSER | unix.CLONE_FS | uintptr(unix.SIGCHLD))
		}},
		// Namespace bits set only in the high word: the kernel reads the low
		// 32 bits (all EINVAL here for CLONE_THREAD without CLONE_SIGHAND),
		// and the filter must let the call through.
		{name: "clone(CLONE_THREAD, namespace bits in high word)", filtered: unix.EINVAL, unfiltered: unix.EINVAL, call: func(string) error {
			return clone(unix.CLONE_THREAD | cloneNamespaces<<32)
		}},
		{name: "clone(high word|CLONE_NEWUSER|CLONE_THREAD)", filtered: unix.EPERM, unfiltered: unix.EINVAL, call: func(string) error {
			return clone(0xffffffff<<32 | unix.CLONE_NEWUSER | unix.CLONE_THREAD)
		}},
		{name: "clone3", filtered: unix.ENOSYS, unfiltered: unix.EINVAL, call: func(string) error {
			_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
			return errnoOrNil(errno)
		}},
		// A pid above PID_MAX_LIMIT: attaching can never stop a real process.
		{name: "ptrace(PTRACE_ATTACH)", filtered: unix.EPERM, unfiltered: unix.ESRCH, call: func(string) error {
			return unix.PtraceAttach(0x3fffffff)
		}},
		{name: "process_vm_readv", filtered: unix.EPERM, unfiltered: unix.EINVAL, call: func(string) error {
			_, err := unix.ProcessVMReadv(unix.Getpid(), nil, nil, 1)
			return err
		}},
		{name: "pidfd_getfd", filtered: unix.EPERM, unfiltered: unix.EBADF, call: func(string) error {
			_, err := unix.PidfdGetfd(-1, 0, 0)
			return err
		}},
		{name: "keyctl", filtered: unix.EPERM, unfiltered: unix.EOPNOTSUPP, call: func(string) error {
			_, err := unix.KeyctlInt(0xffff, 0, 0, 0, 0)
			return err
		}},
		{name: "bpf", filtered: unix.EPERM, unfiltered: unix.EINVAL, privileged: true, call: func(string) error {
			_, _, errno := unix.Syscall(unix.SYS_BPF, 0xffff, 0, 0)
			return errnoOrNil(errno)
		}},
		{name: "perf_event_open", filtered: unix.EPERM, unfiltered: unix.EFAULT, call: func(string) error {
			_, err := unix.PerfEventOpen(nil, 0, -1, -1, 0)
			return err
		}},
		{name: "init_module", filtered: unix.EPERM, unfiltered: unix.ENOEXEC, privileged: true, optional: true, call: func(string) error {
			return unix.InitModule(nil, "")
		}},
		{name: "finit_module", filtered: unix.EPERM, unfiltered: unix.EBADF, privileged: true, optional: true, call: func(string) error {
			return unix.FinitModule(-1, "", 0)
		}},
		{name: "clock_settime", filtered: unix.EPERM, unfiltered: unix.EINVAL, call: func(string) error {
			return unix.ClockSettime(0x7fffffff, &unix.Timespec{})
		}},
		{name: "mknodat(S_IFCHR)", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			return mknodat(d+"/missing/c", unix.S_IFCHR|0o600, unix.Mkdev(1, 3))
		}},
		{name: "mknodat(S_IFBLK)", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			return mknodat(d+"/missing/b", unix.S_IFBLK|0o600, unix.Mkdev(7, 0))
		}},
		{name: "mknodat(high word|S_IFCHR)", filtered: unix.EPERM, unfiltered: unix.ENOENT, call: func(d string) error {
			return mknodat(d+"/missing/c", 0xffff<<32|unix.S_IFCHR|0o600, unix.Mkdev(1, 3))
		}},
		{name: "mknodat(S_IFIFO)", call: func(d string) error {
			return mknodat(d+"/fifo", unix.S_IFIFO|0o600, 0)
		}},
		{name: "mknodat(S_IFREG)", call: func(d string) error {
			return mknodat(d+"/file", unix.S_IFREG|0o600, 0)
		}},
		{name: "ioctl(TIOCSTI)", filtered: unix.EPERM, unfiltered: unix.ENOTTY, call: func(string) error {
			return ioctlDevNull(unix.TIOCSTI)
		}},
		{name: "ioctl(TIOCLINUX)", filtered: unix.EPERM, unfiltered: unix.ENOTTY, call: func(string) error {
			return ioctlDevNull(unix.TIOCLINUX)
		}},
		{name: "ioctl(high word|TIOCSTI)", filtered: unix.EPERM, unfiltered: unix.ENOTTY, call: func(string) error {
			return ioctlDevNull(0xffffffff<<32 | unix.TIOCSTI)
		}},
		{name: "ioctl(TCGETS)", filtered: unix.ENOTTY, unfiltered: unix.ENOTTY, call: func(string) error {
			return ioctlDevNull(unix.TCGETS)
		}},
		{name: "personality(query)", call: func(string) error {
			return personality(0xffffffff)
		}},
		{name: "personality(PER_LINUX32)", call: func(string) error {
			return errors.Join(personality(perLinux32), personality(perLinux))
		}},
		{name: "personality(READ_IMPLIES_EXEC)", filtered: unix.EPERM, call: func(string) error {
			err := personality(readImpliesExec)
			if err == nil {
				return personality(perLinux)
			}
			return err
		}},
		{name: "kcmp(KCMP_VM)", call: func(string) error {
			pid := uintptr(unix.Getpid())
			_, _, errno := unix.Syscall6(unix.SYS_KCMP, pid, pid, 1, 0, 0, 0)
			return errnoOrNil(errno)
		}},
		{name: "socket(AF_NETLINK)", call: func(string) error {
			fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		}},
	}
	return append(p, archProbes()...)
}

// errnoOrNil turns the errno of a raw system call into an error.
func errnoOrNil(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// clone calls clone(2) with flags and no other argument. Callers pass flags
// that the kernel refuses, so that no child is ever made.
func clone(flags uintptr) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	return errnoOrNil(errno)
}

// mknodat calls mknodat(2) relative to the working directory with a full
// 64-bit mode argument.
func mknodat(path string, mode, dev uint64) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	fdcwd := unix.AT_FDCWD
	_, _, errno := unix.Syscall6(unix.SYS_MKNODAT, uintptr(fdcwd), uintptr(unsafe.Pointer(p)), uintptr(mode), uintptr(dev), 0, 0)
	return errnoOrNil(errno)
}

// ioctlDevNull calls ioctl(2) with req on /dev/null, which is no terminal.
func ioctlDevNull(req uint64) error {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	c := byte('x')
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&c)))
	return errnoOrNil(errno)
}

// personality calls personality(2).
func personality(persona uint32) error {
	_, _, errno := unix.Syscall(unix.SYS_PERSONALITY, uintptr(persona), 0, 0)
	return errnoOrNil(errno)
}

// readImpliesExec is the READ_IMPLIES_EXEC personality flag.
const readImpliesExec = 0x0400000
