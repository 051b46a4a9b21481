package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// startArg0 is the argv[0] of the starter: the small process the server
// starts a sandbox's init through.
//
// Go starts a process in a new user namespace with a full fork rather
// than a vfork (the parent must write the child's id maps before the
// child executes), and a full fork of the server copies its page tables
// and makes every page the server writes afterwards fault: about 30 ms of
// CPU per start for an 80 MB server, paid by all of the server's
// goroutines. The server therefore vforks the starter, which is small,
// and the starter forks init into the new namespaces.
const startArg0 = "reins-sandbox-start"

// startConfig is what the server tells the starter (its argv[1], JSON).
// Init's configuration goes to init on the control socket.
type startConfig struct {
	// UID and GID are the host ids root of the sandbox's user namespace
	// maps to.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Root: the server runs as root, and init needs capabilities carried
	// through exec (see initAttr).
	Root bool `json:"root,omitempty"`
}

// runStart is the starter. It waits for the server's go-ahead on its
// stdin (sent once the starter is in the sandbox's cgroups, so init and
// everything after it are born there), starts init, and lives as long as
// init: on SIGTERM it kills init, and it exits once init has been reaped,
// which is after every process of the sandbox has gone. It returns only
// on failure.
func runStart(arg string) error {
	var cfg startConfig
	if err := json.Unmarshal([]byte(arg), &cfg); err != nil {
		return err
	}
	var b [1]byte
	if n, _ := os.Stdin.Read(b[:]); n != 1 {
		return errors.New("the server did not let the sandbox start")
	}
	// Under memory pressure the kernel's OOM killer takes the sandbox's
	// processes (which inherit this) before the server or anything else
	// on the host: slots are counted with overcommit (see the app's
	// capacity), and a sandbox that runs the host out of memory loses.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0); err != nil {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	// Init's parent-death signal follows the thread that forked it: that
	// thread must live as long as the starter.
	runtime.LockOSThread()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	pid, err := syscall.ForkExec("/proc/self/exe", []string{initArg0}, &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{devnull.Fd(), 1, 2, initControlFD},
		Sys:   initAttr(cfg),
	})
	if err != nil {
		err = fmt.Errorf("starting the sandbox's namespaces failed: %w (user namespaces must be enabled: sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0)", err)
		if ctl, cerr := newConn(os.NewFile(initControlFD, "control"), maxToInit); cerr == nil {
			ctl.send(msg{Op: opFailed, Err: err.Error()})
		}
		return err
	}
	devnull.Close()
	unix.Close(initControlFD) // init's now
	go func() {
		<-term
		syscall.Kill(pid, syscall.SIGKILL)
	}()
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == nil {
			break
		}
		if err != syscall.EINTR {
			return fmt.Errorf("wait for init: %w", err)
		}
	}
	if ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ws.ExitStatus())
	return nil
}

// initAttr puts init in new namespaces, its user namespace's root mapped
// to the sandbox's host ids.
func initAttr(cfg startConfig) *syscall.SysProcAttr {
	sys := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		Setsid:      true,
		Pdeathsig:   syscall.SIGKILL,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: cfg.UID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: cfg.GID, Size: 1}},
	}
	if cfg.Root {
		// A root server's init keeps root's ids until it has opened the
		// workspace (see openWorkspace), so it needs these capabilities
		// (in its own user namespace only) carried through exec; it then
		// drops root's groups and ids.
		sys.GidMappingsEnableSetgroups = true
		sys.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_NET_ADMIN,
			// Mapping the launcher's user onto init's (root of the sandbox's
			// namespace) needs CAP_SETFCAP there.
			unix.CAP_SETFCAP}
	}
	return sys
}
