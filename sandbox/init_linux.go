package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Names under which the binary is re-executed (its argv[0]).
const (
	initArg0 = "reins-sandbox-init"
	execArg0 = "reins-sandbox-exec"
)

// initControlFD is init's end of the control socket.
const initControlFD = 3

// initConfig is what the server tells init (its first control message).
type initConfig struct {
	// Workspace is the host path of the workspace. Init opens it before
	// anything else, while it still has the server's file access.
	Workspace string `json:"workspace"`
	// SwitchUser: init starts with the server's (root's) ids and switches
	// to the sandbox's mapped user once it has opened the workspace.
	SwitchUser bool     `json:"switch_user,omitempty"`
	ReadOnly   bool     `json:"read_only,omitempty"`
	ExtraCA    string   `json:"extra_ca,omitempty"` // PEM
	Env        []string `json:"env"`
	Limits     Limits   `json:"limits"`
	Hostname   string   `json:"hostname"`
	// Binds are bound read-only in the new root. Init opens their
	// sources along with the workspace.
	Binds []Bind `json:"binds,omitempty"`
	// Memory are mounted under MemoryDir; init opens their sources along
	// with the workspace.
	Memory []MemoryMount `json:"memory,omitempty"`
}

// init does the work of a sandbox's own processes, which are the program
// that imports this package re-executed under another argv[0], and exits
// in them; in any other process it returns at once.
//
// It runs from a package initializer rather than from main so that a
// re-executed helper skips the initializers of the packages that do not
// come before this one: Go initializes packages in the order of their
// import paths among those whose imports are done, and this package
// imports only the standard library and small system packages. In the
// server's binary that cuts a helper's start from about 45 ms to about
// 15 ms (the JSON Schema compiler, the model SDKs and the HTTP API are
// never initialized); each sandbox start and each process it runs is one
// such start. cmd/reins tests that the heavy packages stay out.
func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case startArg0, initArg0, execArg0:
		// Descriptors the server inherited from whoever started it (and did
		// not mark close-on-exec) must not reach the sandbox's programs.
		if err := unix.CloseRange(4, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
			fmt.Fprintln(os.Stderr, "reins sandbox: close_range:", err)
			os.Exit(1)
		}
	default:
		return
	}
	arg := ""
	if len(os.Args) > 1 {
		arg = os.Args[1]
	}
	switch os.Args[0] {
	case startArg0:
		err := runStart(arg)
		fmt.Fprintln(os.Stderr, "reins sandbox start:", err)
		os.Exit(1)
	case initArg0:
		err := runInit()
		fmt.Fprintln(os.Stderr, "reins sandbox init:", err)
		os.Exit(1)
	case execArg0:
		err := runExec(arg)
		fmt.Fprintln(os.Stderr, "reins sandbox:", err)
		os.Exit(127)
	}
}

// runInit is the sandbox's PID 1: it builds the sandbox, hands the
// server the proxy listener, then starts and reaps processes on the
// server's behalf until the server goes away. It returns only on failure.
func runInit() error {
	// Init remounts and pivots the root of its mount namespace: run by
	// mistake outside a new PID namespace (as anything but PID 1), it
	// would do that to the host's.
	if os.Getpid() != 1 {
		return errors.New("not the first process of a new PID namespace: refusing to set up a sandbox here")
	}
	ctl, err := newConn(os.NewFile(initControlFD, "control"), maxToInit)
	if err != nil {
		return err
	}
	m, files, err := ctl.recv()
	closeAll(files)
	if err != nil {
		return err
	}
	if m.Op != opSetup || m.Init == nil {
		return fmt.Errorf("the server sent %q before the sandbox's configuration", m.Op)
	}
	cfg := *m.Init
	ln, err := setup(&cfg)
	if err != nil {
		ctl.send(msg{Op: opFailed, Err: err.Error()})
		return err
	}
	lf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return err
	}
	if err := ctl.send(msg{Op: opReady}, lf); err != nil {
		return err
	}
	lf.Close()
	in := &initProc{ctl: ctl, cfg: &cfg, procs: map[int]bool{}}
	go in.reap()
	in.serve()
	// The server went away: PID 1 exits and the kernel kills every
	// process left in the sandbox.
	os.Exit(0)
	return nil
}

// setup builds the sandbox from inside: file system, host name, loopback,
// the proxy's listening socket. Nothing of the server stays reachable.
func setup(cfg *initConfig) (net.Listener, error) {
	// Signals sent from inside the sandbox to its init are dropped by the
	// kernel unless init handles them: ignore them all (SIGCHLD aside).
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	// Not dumpable: processes of the sandbox cannot ptrace init or open
	// its /proc files (its exe, its memory).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("prctl dumpable: %w", err)
	}
	ws, binds, err := openSources(cfg)
	if err != nil {
		return nil, err
	}
	err = setupRoot(cfg, ws, binds)
	ws.Close()
	closeAll(binds)
	if err != nil {
		return nil, err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return nil, fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", ProxyAddr)
	if err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	return ln, nil
}

// openSources opens the workspace and the sources of the binds and of
// the memory mounts (binds first, then memory, in one slice) by their
// paths in the sandbox's mount namespace (a descriptor opened by the
// server would name a mount of the server's namespace, which cannot be
// bound here), then gives up the server's ids when it started with them.
func openSources(cfg *initConfig) (ws *os.File, binds []*os.File, err error) {
	sources := make([]string, 0, len(cfg.Binds)+len(cfg.Memory))
	names := make([]string, 0, cap(sources))
	for _, b := range cfg.Binds {
		sources, names = append(sources, b.Source), append(names, "bind "+b.Target)
	}
	for _, m := range cfg.Memory {
		sources, names = append(sources, m.Source), append(names, "memory "+m.Name)
	}
	for i, src := range sources {
		f, err := openDir(src)
		if err != nil {
			closeAll(binds)
			return nil, nil, fmt.Errorf("%s: %w", names[i], err)
		}
		binds = append(binds, f)
	}
	ws, err = openWorkspace(cfg)
	if err != nil {
		closeAll(binds)
		return nil, nil, err
	}
	return ws, binds, nil
}

func openDir(path string) (*os.File, error) {
	return os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
}

// openWorkspace opens the workspace, then gives up the server's ids when
// it started with them.
func openWorkspace(cfg *initConfig) (*os.File, error) {
	ws, err := openDir(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !cfg.SwitchUser {
		return ws, nil
	}
	// Go's syscall package applies these to every thread.
	if err := syscall.Setgroups(nil); err != nil {
		ws.Close()
		return nil, fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(0, 0, 0); err != nil {
		ws.Close()
		return nil, fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(0, 0, 0); err != nil {
		ws.Close()
		return nil, fmt.Errorf("setresuid: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		ws.Close()
		return nil, fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return ws, nil
}

// loopbackUp brings up lo, the only interface of the sandbox's network
// namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// initProc is the running init: it starts processes and reports the exits
// of those it started.
type initProc struct {
	ctl *conn
	cfg *initConfig

	mu    sync.Mutex // guards procs; held across fork so that reap sees every pid it started
	procs map[int]bool
}

func (in *initProc) serve() {
	for {
		m, files, err := in.ctl.recv()
		if err != nil {
			return
		}
		switch m.Op {
		case opSpawn:
			in.spawn(m, files)
		case opSignal:
			pid := m.Pid
			if m.Group {
				pid = -pid
			}
			if m.Pid > 1 {
				unix.Kill(pid, syscall.Signal(m.Sig))
			}
		}
		closeAll(files)
	}
}

// spawn starts a process through the launcher (runExec), which confines
// it and then executes the program.
func (in *initProc) spawn(m msg, files []*os.File) {
	reply := msg{Op: opStarted, ID: m.ID}
	pid, err := in.launch(m, files)
	if err != nil {
		reply.Err = err.Error()
	}
	reply.Pid = pid
	in.ctl.send(reply)
}

func (in *initProc) launch(m msg, files []*os.File) (int, error) {
	if len(files) != 3 || len(m.Argv) == 0 {
		return 0, errors.New("a process needs argv and three descriptors")
	}
	spec := execSpec{Argv: m.Argv, Dir: m.Dir, Env: mergeEnv(in.cfg.Env, m.Env),
		Limits: in.cfg.Limits, ReadOnly: in.cfg.ReadOnly, Binds: bindTargets(in.cfg.Binds), Memory: len(in.cfg.Memory) > 0}
	arg, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	status, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer status.Close()
	attr := &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd(), w.Fd()},
		Sys:   launchAttr(m.Flags),
	}
	in.mu.Lock()
	pid, err := syscall.ForkExec("/proc/self/exe", []string{execArg0, string(arg)}, attr)
	if err == nil {
		in.procs[pid] = true
	}
	in.mu.Unlock()
	w.Close()
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", m.Argv[0], err)
	}
	// The launcher's status pipe closes on a successful exec; anything
	// written to it is the reason the exec failed. Its exit is then not
	// reported: either it was already (before the failed "started", which
	// the server takes as the end of that pid), or it will not be.
	why, _ := io.ReadAll(io.LimitReader(status, 4096))
	if len(why) > 0 {
		in.mu.Lock()
		delete(in.procs, pid)
		in.mu.Unlock()
		return pid, errors.New(string(why))
	}
	return pid, nil
}

// launchAttr starts the launcher as the unprivileged user: in a user
// namespace of its own (nested in the sandbox's) whose only id is UID,
// so it has no capabilities anywhere once it executes.
func launchAttr(flags int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: UID, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: GID, HostID: 0, Size: 1}},
		Setsid:      flags&flagSetsid != 0,
		Setctty:     flags&flagSetctty != 0,
		Setpgid:     flags&flagSetpgid != 0 && flags&flagSetsid == 0,
		Ctty:        0,
		Pdeathsig:   syscall.SIGKILL,
	}
}

// reap waits for every process of the sandbox (orphans are re-parented
// to init) and reports the exits of those init started.
func (in *initProc) reap() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	for range sigs {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			// Sent under the lock, so that an exit always reaches the
			// server before a failed "started" for the same pid.
			in.mu.Lock()
			if in.procs[pid] {
				delete(in.procs, pid)
				in.ctl.send(msg{Op: opExit, Pid: pid, Status: int(ws)})
			}
			in.mu.Unlock()
		}
	}
}

func bindTargets(binds []Bind) []string {
	var t []string
	for _, b := range binds {
		t = append(t, b.Target)
	}
	return t
}
