//go:build linux

package tools

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/reinsdev/reins/sandbox/landlockrule"
)

// systemDirs are readable and executable inside the sandbox.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys", "/run"}

// deviceDirs are writable inside the sandbox (/dev/null, /dev/tty, ptys).
var deviceDirs = []string{"/dev"}

// sandbox confines the processes a workspace starts with Landlock: the
// workspace is writable (readable only when read-only), so is the
// workspace's private temporary directory, system directories are readable
// and executable, nothing else is reachable.
type sandbox struct {
	mu     sync.Mutex // guards the fields below; held while the ruleset is applied, so that it is not closed meanwhile
	fd     int        // the Landlock ruleset; -1 when Landlock is unavailable
	closed bool
}

func newSandbox(dir string, readOnly bool, tmp string, logger *slog.Logger) *sandbox {
	s := &sandbox{fd: -1}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		logger.Warn("landlock is not supported by this kernel: bash and processes run without file system confinement", "workspace", dir, "err", err)
		return s
	}
	all := landlockrule.Rights(abi)
	fd, err := ll.LandlockCreateRuleset(&ll.RulesetAttr{HandledAccessFS: all}, 0)
	if err != nil {
		logger.Warn("landlock ruleset could not be created: bash and processes run without file system confinement", "err", err)
		return s
	}
	ro := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	ws := all
	if readOnly {
		ws = ro
	}
	for _, p := range systemDirs {
		landlockrule.Add(fd, p, ro, all)
	}
	for _, p := range deviceDirs {
		landlockrule.Add(fd, p, all, all)
	}
	if tmp != "" {
		landlockrule.Add(fd, tmp, all, all)
	}
	if err := landlockrule.Add(fd, dir, ws, all); err != nil {
		unix.Close(fd)
		logger.Warn("landlock rule for the workspace failed: bash and processes run without file system confinement", "err", err)
		return s
	}
	s.fd = fd
	logger.Debug("landlock confines bash and processes to the workspace", "abi", abi, "workspace", dir)
	return s
}

func (s *sandbox) enabled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fd >= 0 && !s.closed
}

// start runs fn (which starts a process) on an OS thread confined by the
// ruleset, so that the process inherits the confinement and the rest of
// the program does not. The thread is never unlocked: it ends with its
// goroutine and the Go runtime discards it.
func (s *sandbox) start(fn func() error) error {
	if s == nil || !s.enabled() {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("tools: no_new_privs: %w", err)
			return
		}
		s.mu.Lock()
		err := ll.LandlockRestrictSelf(s.fd, 0)
		s.mu.Unlock()
		if err != nil {
			errc <- fmt.Errorf("tools: landlock: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func (s *sandbox) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 && !s.closed {
		unix.Close(s.fd)
	}
	s.closed = true
}
