//go:build linux && (amd64 || arm64)

package seccomp

import "golang.org/x/sys/unix"

// absent is the syscall number of a rule whose call the build architecture
// does not have; such rules are left out of the program.
const absent = -1

// matchOp says how a rule looks at an argument.
type matchOp int

const (
	always matchOp = iota // every call matches
	anyBit                // the argument shares a bit with mask
	oneOf                 // the argument ANDed with mask is one of values
	noneOf                // the argument ANDed with mask is none of values
)

// argMatch selects the calls of a rule by one argument. Only the low 32 bits
// of the argument are examined; see the package documentation.
type argMatch struct {
	op     matchOp
	arg    int // index into seccomp_data.args
	mask   uint32
	values []uint32
}

// rule is one entry of the filter: a system call, the calls of it that
// match, the errno that they get instead of running, and why.
type rule struct {
	name   string
	nr     int // number on the build architecture, or absent
	when   argMatch
	errno  unix.Errno
	reason string
}

// Argument masks and values used by the rules.
const (
	// cloneNamespaces are the namespace flags clone(2) accepts. CLONE_NEWTIME
	// is not among them: clone's low byte is the exit signal, so only clone3
	// and unshare can ask for a time namespace, and both are refused whole.
	cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

	perLinux    = 0x0000
	perLinux32  = 0x0008
	perQuery    = 0xffffffff
	allBits     = 0xffffffff
	fileTypeMsk = unix.S_IFMT
)

// deviceNodes matches a mknod or mknodat whose mode argument (index arg)
// creates a character or block device.
func deviceNodes(arg int) argMatch {
	return argMatch{op: oneOf, arg: arg, mask: fileTypeMsk, values: []uint32{unix.S_IFCHR, unix.S_IFBLK}}
}

// rules returns the filter's table, in the order the program checks it.
func rules() []rule {
	const eperm = unix.EPERM
	return []rule{
		// Mounts.
		{name: "mount", nr: unix.SYS_MOUNT, errno: eperm, reason: "attaches filesystems; tools never mount"},
		{name: "umount2", nr: unix.SYS_UMOUNT2, errno: eperm, reason: "detaches filesystems, which could uncover what the sandbox's mounts hide"},
		{name: "pivot_root", nr: unix.SYS_PIVOT_ROOT, errno: eperm, reason: "changes the root mount; only container setup needs it"},
		{name: "chroot", nr: unix.SYS_CHROOT, errno: eperm, reason: "no tool needs it, and with a leaked CAP_SYS_CHROOT it is a step of classic escapes"},
		{name: "move_mount", nr: unix.SYS_MOVE_MOUNT, errno: eperm, reason: "new mount API"},
		{name: "open_tree", nr: unix.SYS_OPEN_TREE, errno: eperm, reason: "new mount API: clones mount trees"},
		{name: "fsopen", nr: unix.SYS_FSOPEN, errno: eperm, reason: "new mount API: reaches filesystem parsers"},
		{name: "fsconfig", nr: unix.SYS_FSCONFIG, errno: eperm, reason: "new mount API: reaches filesystem parsers"},
		{name: "fsmount", nr: unix.SYS_FSMOUNT, errno: eperm, reason: "new mount API"},
		{name: "fspick", nr: unix.SYS_FSPICK, errno: eperm, reason: "new mount API: reconfigures mounted filesystems"},
		{name: "mount_setattr", nr: unix.SYS_MOUNT_SETATTR, errno: eperm, reason: "changes mount flags such as read-only"},

		// Namespaces.
		{name: "setns", nr: unix.SYS_SETNS, errno: eperm, reason: "joins other namespaces"},
		{name: "unshare", nr: unix.SYS_UNSHARE, errno: eperm, reason: "new user namespaces give back capabilities and open much kernel surface"},
		{name: "clone", nr: unix.SYS_CLONE, when: argMatch{op: anyBit, arg: 0, mask: cloneNamespaces}, errno: eperm, reason: "clone with namespace flags is unshare by another name; plain fork and threads stay allowed"},
		{name: "clone3", nr: unix.SYS_CLONE3, errno: unix.ENOSYS, reason: "its flags are behind a pointer; ENOSYS makes libc fall back to clone, which is checked"},

		// Other processes.
		{name: "ptrace", nr: unix.SYS_PTRACE, errno: eperm, reason: "reads and writes other processes, including the sandbox helper"},
		{name: "process_vm_readv", nr: unix.SYS_PROCESS_VM_READV, errno: eperm, reason: "reads another process's memory"},
		{name: "process_vm_writev", nr: unix.SYS_PROCESS_VM_WRITEV, errno: eperm, reason: "writes another process's memory"},
		{name: "pidfd_getfd", nr: unix.SYS_PIDFD_GETFD, errno: eperm, reason: "takes file descriptors out of another process, as ptrace could"},

		// Keyring, BPF, perf.
		{name: "keyctl", nr: unix.SYS_KEYCTL, errno: eperm, reason: "the kernel keyring is not namespaced and has had many bugs"},
		{name: "add_key", nr: unix.SYS_ADD_KEY, errno: eperm, reason: "kernel keyring"},
		{name: "request_key", nr: unix.SYS_REQUEST_KEY, errno: eperm, reason: "kernel keyring; can start user-space helpers on the host"},
		{name: "bpf", nr: unix.SYS_BPF, errno: eperm, reason: "loads programs into the kernel"},
		{name: "perf_event_open", nr: unix.SYS_PERF_EVENT_OPEN, errno: eperm, reason: "large kernel surface; leaks kernel addresses and timing"},

		// Modules and kexec.
		{name: "init_module", nr: unix.SYS_INIT_MODULE, errno: eperm, reason: "loads kernel code"},
		{name: "finit_module", nr: unix.SYS_FINIT_MODULE, errno: eperm, reason: "loads kernel code"},
		{name: "delete_module", nr: unix.SYS_DELETE_MODULE, errno: eperm, reason: "unloads kernel code"},
		{name: "kexec_load", nr: unix.SYS_KEXEC_LOAD, errno: eperm, reason: "replaces the running kernel"},
		{name: "kexec_file_load", nr: unix.SYS_KEXEC_FILE_LOAD, errno: eperm, reason: "replaces the running kernel"},

		// Whole-machine administration.
		{name: "reboot", nr: unix.SYS_REBOOT, errno: eperm, reason: "restarts or halts the machine"},
		{name: "swapon", nr: unix.SYS_SWAPON, errno: eperm, reason: "changes the machine's swap"},
		{name: "swapoff", nr: unix.SYS_SWAPOFF, errno: eperm, reason: "changes the machine's swap"},
		{name: "acct", nr: unix.SYS_ACCT, errno: eperm, reason: "switches process accounting for the machine"},
		{name: "syslog", nr: unix.SYS_SYSLOG, errno: eperm, reason: "reads the kernel log, which leaks kernel addresses"},
		{name: "quotactl", nr: unix.SYS_QUOTACTL, errno: eperm, reason: "changes disk quotas"},
		{name: "quotactl_fd", nr: unix.SYS_QUOTACTL_FD, errno: eperm, reason: "changes disk quotas"},
		{name: "vhangup", nr: unix.SYS_VHANGUP, errno: eperm, reason: "hangs up the controlling terminal"},
		{name: "nfsservctl", nr: unix.SYS_NFSSERVCTL, errno: eperm, reason: "removed from the kernel; nothing calls it"},
		{name: "lookup_dcookie", nr: unix.SYS_LOOKUP_DCOOKIE, errno: eperm, reason: "profiling interface, removed from recent kernels"},
		{name: "_sysctl", nr: sysSysctl, errno: eperm, reason: "binary sysctl, removed from the kernel; /proc/sys is the interface"},
		{name: "uselib", nr: sysUselib, errno: eperm, reason: "a.out loader, long obsolete"},

		// Clocks.
		{name: "settimeofday", nr: unix.SYS_SETTIMEOFDAY, errno: eperm, reason: "sets the machine's clock"},
		{name: "clock_settime", nr: unix.SYS_CLOCK_SETTIME, errno: eperm, reason: "sets the machine's clock"},
		{name: "clock_adjtime", nr: unix.SYS_CLOCK_ADJTIME, errno: eperm, reason: "tunes the machine's clock; the read-only query is behind a pointer"},
		{name: "adjtimex", nr: unix.SYS_ADJTIMEX, errno: eperm, reason: "tunes the machine's clock; the read-only query is behind a pointer"},

		// Files.
		{name: "open_by_handle_at", nr: unix.SYS_OPEN_BY_HANDLE_AT, errno: eperm, reason: "opens files by handle, around path checks (the shocker escape)"},
		{name: "name_to_handle_at", nr: unix.SYS_NAME_TO_HANDLE_AT, errno: eperm, reason: "makes handles for open_by_handle_at"},
		{name: "mknod", nr: sysMknod, when: deviceNodes(1), errno: eperm, reason: "device nodes give raw access to hardware; FIFOs and files stay allowed"},
		{name: "mknodat", nr: unix.SYS_MKNODAT, when: deviceNodes(2), errno: eperm, reason: "device nodes give raw access to hardware; FIFOs and files stay allowed"},

		// Memory and hardware.
		{name: "userfaultfd", nr: unix.SYS_USERFAULTFD, errno: eperm, reason: "stalls kernel page faults at will, a common exploit ingredient"},
		{name: "io_uring_setup", nr: unix.SYS_IO_URING_SETUP, errno: eperm, reason: "a large kernel surface with a history of exploits; programs fall back to ordinary system calls"},
		{name: "io_uring_enter", nr: unix.SYS_IO_URING_ENTER, errno: eperm, reason: "as io_uring_setup"},
		{name: "io_uring_register", nr: unix.SYS_IO_URING_REGISTER, errno: eperm, reason: "as io_uring_setup"},
		{name: "iopl", nr: sysIopl, errno: eperm, reason: "raw I/O port access"},
		{name: "ioperm", nr: sysIoperm, errno: eperm, reason: "raw I/O port access"},
		{name: "personality", nr: unix.SYS_PERSONALITY, when: argMatch{op: noneOf, arg: 0, mask: allBits, values: []uint32{perLinux, perLinux32, perQuery}}, errno: eperm, reason: "other personalities switch off ASLR or make readable memory executable"},

		// Terminals.
		{name: "ioctl", nr: unix.SYS_IOCTL, when: argMatch{op: oneOf, arg: 1, mask: allBits, values: []uint32{unix.TIOCSTI, unix.TIOCLINUX}}, errno: eperm, reason: "TIOCSTI and TIOCLINUX push input into a terminal another process reads"},
	}
}
