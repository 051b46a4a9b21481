// Package seccomp installs the system-call filter of the reins sandbox.
//
// The sandbox helper calls [Install] on one locked OS thread just before it
// execs the sandboxed program (bash and whatever bash starts). The filter is a
// classic-BPF seccomp program built in pure Go; it applies to the calling
// thread only (no SECCOMP_FILTER_FLAG_TSYNC) and, like every seccomp filter,
// is inherited across fork, clone and execve and cannot be removed.
//
// The filter is a second line of defence: the sandbox already runs as an
// unprivileged uid in new user, PID, mount, network, IPC and UTS namespaces
// with no_new_privs and Landlock, so the kernel refuses most of the calls
// below anyway. The filter takes away kernel surface that no tool needs, so
// that a kernel bug behind one of those calls, or a capability leaked by a
// mistake elsewhere, is not reachable from the sandbox.
//
// # What it does
//
// A call made with another architecture's calling convention (for example
// i386 int 0x80 on amd64, or AArch32 on arm64) kills the process. On amd64 a
// call through the x32 ABI (bit 30 of the number set) fails with ENOSYS, as on
// a kernel built without x32.
//
// These calls fail with EPERM before the kernel runs them:
//
//   - mounts and the new mount API: mount, umount2, pivot_root, chroot,
//     move_mount, open_tree, fsopen, fsconfig, fsmount, fspick, mount_setattr;
//   - namespaces: setns, unshare, and clone whose flags ask for any new
//     namespace (CLONE_NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET,
//     NEWCGROUP);
//   - reaching into other processes: ptrace, process_vm_readv,
//     process_vm_writev, pidfd_getfd;
//   - the kernel keyring: keyctl, add_key, request_key;
//   - BPF and perf: bpf, perf_event_open;
//   - kernel modules and kexec: init_module, finit_module, delete_module,
//     kexec_load, kexec_file_load;
//   - whole-machine administration: reboot, swapon, swapoff, acct, syslog,
//     quotactl, quotactl_fd, vhangup, nfsservctl, _sysctl, uselib, lookup_dcookie;
//   - the clocks: settimeofday, clock_settime, clock_adjtime, adjtimex (the
//     read-only adjtimex query cannot be told apart, because its mode sits
//     behind a pointer that BPF cannot follow, so it fails too);
//   - file handles: open_by_handle_at, name_to_handle_at;
//   - userfaultfd, a common ingredient of kernel exploits;
//   - I/O port access on amd64: iopl, ioperm;
//   - personality, except the query (0xffffffff), PER_LINUX and PER_LINUX32:
//     the other personalities switch off ASLR or make readable memory
//     executable;
//   - ioctl TIOCSTI and TIOCLINUX, which push input into a terminal that
//     another process reads;
//   - mknod (amd64) and mknodat creating a character or block device.
//
// clone3 fails with ENOSYS instead: its flags sit in a structure behind a
// pointer, which the filter cannot inspect, and ENOSYS makes glibc fall back
// to clone, whose flags it can. (Go's os/exec uses clone already.)
//
// chroot needs CAP_SYS_CHROOT, which the sandbox does not hold, so the kernel
// would refuse it anyway; it is refused here too because no tool needs it and
// it is a step of classic escapes should a capability ever leak.
//
// # What it deliberately allows
//
// Everything not listed above is allowed, including: clone without namespace
// flags (fork, vfork, threads), mknodat of FIFOs, sockets and regular files,
// kcmp (it only compares two processes the caller may already inspect),
// socket(AF_NETLINK) (ip and ss use it, and it only sees the sandbox's own
// network namespace), socket(AF_PACKET) (the kernel asks for CAP_NET_RAW,
// which the sandbox's unprivileged uid does not hold, and it too would only
// see the sandbox's own interfaces), seccomp itself (a new filter can only
// narrow this one) and Landlock. io_uring is refused (EPERM): it is a large
// kernel surface with a history of exploits, and programs that use it fall
// back to ordinary system calls when it is unavailable.
//
// Arguments are checked as the kernel reads them: the seccomp data holds
// 64-bit arguments, but the flags of clone, the request of ioctl, the mode of
// mknodat and the persona of personality are 32-bit (or narrower) in the
// kernel, so the filter examines only their low 32 bits. Setting the high
// word therefore cannot slip a call past it.
//
// Only linux/amd64 and linux/arm64 are supported; elsewhere [Install] returns
// an error wrapping [errors.ErrUnsupported].
package seccomp
