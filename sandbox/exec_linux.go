package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/reinsdev/reins/sandbox/landlockrule"
	"github.com/reinsdev/reins/sandbox/seccomp"
)

// execSpec is what the launcher is told (its argv[1], JSON).
type execSpec struct {
	Argv     []string `json:"argv"`
	Dir      string   `json:"dir,omitempty"`
	Env      []string `json:"env"`
	Limits   Limits   `json:"limits"`
	ReadOnly bool     `json:"read_only,omitempty"`
	// Binds are the targets of the sandbox's read-only binds.
	Binds []string `json:"binds,omitempty"`
	// Memory: the sandbox has memory mounts under MemoryDir.
	Memory bool `json:"memory,omitempty"`
}

// execStatusFD is the launcher's status pipe: closed by a successful
// exec, written with the reason of a failed one.
const execStatusFD = 3

// runExec is the launcher: it runs as the unprivileged user, applies
// the per-process limits and confinement on its own thread, then executes
// the program. It returns only on failure.
func runExec(arg string) error {
	runtime.LockOSThread()
	// Not dumpable while unconfined: the sandbox's other processes (the
	// same user) cannot open this one's memory through /proc before the
	// filters are on. Executing the program makes it dumpable again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl dumpable: %w", err)
	}
	status := os.NewFile(execStatusFD, "status")
	unix.CloseOnExec(execStatusFD)
	err := launch(arg)
	fmt.Fprint(status, err)
	return err
}

func launch(arg string) error {
	var spec execSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		return err
	}
	if len(spec.Argv) == 0 {
		return fmt.Errorf("no program to run")
	}
	if err := setLimits(spec.Limits); err != nil {
		return err
	}
	dir := spec.Dir
	if dir == "" {
		dir = WorkspaceDir
	}
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("working directory %s: %w", dir, err)
	}
	path, err := lookPath(spec.Argv[0], spec.Env)
	if err != nil {
		return err
	}
	if err := confine(spec); err != nil {
		return err
	}
	if err := unix.Exec(path, spec.Argv, spec.Env); err != nil {
		return fmt.Errorf("exec %s: %w", spec.Argv[0], err)
	}
	return nil
}

// lookPath finds a program in the PATH of env.
func lookPath(name string, env []string) (string, error) {
	if p, ok := envValue(env, "PATH"); ok {
		os.Setenv("PATH", p)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: command not found", name)
	}
	return path, nil
}

// setLimits applies the per-process limits and lowers the priority.
func setLimits(l Limits) error {
	limits := []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_NPROC, uint64(l.Processes)},
		{unix.RLIMIT_DATA, uint64(l.Memory)}, // 0 when a cgroup bounds the sandbox's memory
		{unix.RLIMIT_NOFILE, uint64(l.Files)},
		{unix.RLIMIT_CORE, 0},
	}
	for _, r := range limits {
		if r.v == 0 && r.res != unix.RLIMIT_CORE {
			continue
		}
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err != nil {
			return err
		}
		v := min(r.v, cur.Max)
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.res, err)
		}
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, 10); err != nil {
		return fmt.Errorf("setpriority: %w", err)
	}
	return nil
}

// confine sets no_new_privs and a Landlock ruleset on this thread (the
// second layer under the mount namespace): the workspace, /tmp, /dev/shm
// and the terminal devices are writable, system directories and the binds
// readable and executable, nothing else reachable.
func confine(spec execSpec) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := landlock(spec); err != nil {
		return err
	}
	if err := seccomp.Install(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

func landlock(spec execSpec) error {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return nil // the namespaces are the boundary; Landlock is a second layer
	}
	all := landlockrule.Rights(abi)
	fd, err := ll.LandlockCreateRuleset(&ll.RulesetAttr{HandledAccessFS: all}, 0)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	defer unix.Close(fd)
	ro := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	ws := all
	if spec.ReadOnly {
		ws = ro
	}
	type rule struct {
		path   string
		access uint64
	}
	rules := []rule{
		{"/", uint64(ll.AccessFSReadDir)}, {"/usr", ro}, {"/bin", ro}, {"/sbin", ro}, {"/lib", ro}, {"/lib32", ro}, {"/lib64", ro},
		{"/libx32", ro}, {"/etc", ro}, {"/proc", ro | ll.AccessFSWriteFile}, {"/dev", all},
		{"/tmp", all}, {"/var/tmp", all}, {WorkspaceDir, ws},
	}
	for _, b := range spec.Binds {
		rules = append(rules, rule{b, ro})
	}
	if spec.Memory {
		// Read-only stores are read-only mounts: Landlock cannot narrow
		// a subtree below what its parent grants.
		rules = append(rules, rule{MemoryDir, all})
	}
	for _, r := range rules {
		if err := landlockrule.Add(fd, r.path, r.access, all); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("landlock rule %s: %w", r.path, err)
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}
