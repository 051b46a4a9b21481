// Package sandbox runs the processes of a session (bash, the processes and
// terminals it starts) in a sandbox of their own: on Linux, new user, PID,
// mount, network, IPC, UTS and cgroup namespaces, a root file system made of
// read-only binds of the host's system directories plus the session's
// workspace, an unprivileged user, no capabilities, no_new_privs, a seccomp
// filter, Landlock and resource limits.
//
// A sandbox is a re-execution of the current binary as the sandbox's init
// (PID 1 of its PID namespace). The server talks to it over a socket pair:
// it asks init to start processes (handing over their stdin, stdout and
// stderr as file descriptors) and to signal them, and init reports their
// exits. Init hands the server the listening socket of the sandbox's only
// way out, an HTTP proxy address on the sandbox's loopback, so the server
// serves the egress proxy for that sandbox directly.
//
// The starter, init and the launcher are the program that imports this package
// re-executed: a package initializer runs them (see init in
// init_linux.go), so no program needs to call anything for them.
package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Inside are the paths and values processes see inside a sandbox.
const (
	// WorkspaceDir is where the session's workspace is mounted.
	WorkspaceDir = "/workspace"
	// OutputsDir is the directory of the workspace (relative to it) whose
	// files the server keeps as the session's outputs; a sandbox of a
	// writable workspace starts with it.
	OutputsDir = "outputs"
	// SessionOutputs is a symbolic link to the outputs directory, at the
	// path the Managed Agents API gives agent outputs.
	SessionOutputs = "/mnt/session/outputs"
	// ProxyAddr is the egress proxy's address on the sandbox's loopback.
	ProxyAddr = "127.0.0.1:3128"
	// User is the name of the unprivileged user tools run as.
	User = "user"
	// UID and GID are the ids tools run as inside the sandbox.
	UID, GID = 1000, 1000
	// Path is the PATH of processes inside a sandbox.
	Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// BindRoot is the directory under which [Bind] targets must lie.
	BindRoot = "/opt"
	// PackagesDir is where an environment's installed packages are
	// bound.
	PackagesDir = "/opt/reins/packages"
)

// Limits bound the resources of one sandbox. Zero fields take the
// defaults of [DefaultLimits].
type Limits struct {
	// Memory caps the memory of the whole sandbox where a cgroup can be
	// made, and of each process (address space) otherwise, in bytes.
	Memory int64
	// Processes caps the number of processes and threads.
	Processes int
	// CPU caps the sandbox's CPU time, in CPUs (1.5 = one and a half
	// cores), where a cgroup can be made; processes run at a lower
	// priority (nice 10) everywhere.
	CPU float64
	// Files caps the open files of each process.
	Files int
	// TmpBytes caps each of the private /tmp and /dev/shm.
	TmpBytes int64
}

// DefaultLimits are the limits of a sandbox when the operator sets none.
func DefaultLimits() Limits {
	return Limits{Memory: 2 << 30, Processes: 512, CPU: 1, Files: 4096, TmpBytes: 512 << 20}
}

// WithDefaults returns l with DefaultLimits in its zero fields.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	if l.CPU <= 0 {
		l.CPU = d.CPU
	}
	if l.Files <= 0 {
		l.Files = d.Files
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = d.TmpBytes
	}
	return l
}

// Config configures a [Manager].
type Config struct {
	// Limits bound each sandbox.
	Limits Limits
	// HostUID and HostGID are the host ids that sandboxes run as when the
	// server runs as root (default 65534, "nobody"). A server that is not
	// root runs its sandboxes as its own user: the namespaces keep them
	// apart from it.
	HostUID, HostGID int
	// StateDir holds the sandboxes' bookkeeping (pid files), so that a
	// start after a crash can reap what a killed server left behind.
	StateDir string
	// Logger receives diagnostics.
	Logger *slog.Logger
}

// Options describe one sandbox.
type Options struct {
	// Name identifies the sandbox (a session id): it names its cgroup and
	// its state file.
	Name string
	// Workspace is the host directory mounted at [WorkspaceDir].
	Workspace string
	// ReadOnly mounts the workspace read-only.
	ReadOnly bool
	// Env is added to the environment of every process in the sandbox.
	Env []string
	// Egress serves the sandbox's egress proxy on ln until ln is closed.
	// Nil leaves the sandbox without any network beyond its loopback.
	Egress func(ln net.Listener)
	// ExtraCA (PEM) is trusted inside the sandbox in addition to the
	// host's roots: the system bundle and [CABundle] hold both, and the
	// variables programs read for a bundle (SSL_CERT_FILE,
	// NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, …) point at it.
	ExtraCA []byte
	// Binds are host directories made visible read-only inside.
	Binds []Bind
	// Memory are host directories mounted under [MemoryDir], each at
	// MemoryDir/Name. The rest of MemoryDir is the sandbox's own
	// scratch space, lost when it ends. Nil leaves MemoryDir out.
	Memory []MemoryMount
}

// MemoryDir is where a sandbox sees its [MemoryMount]s.
const MemoryDir = "/mnt/memory"

// A MemoryMount makes the host directory Source visible at
// MemoryDir/Name, writable unless ReadOnly (which the file system
// enforces). Name is one path segment.
type MemoryMount struct {
	Source   string `json:"source"`
	Name     string `json:"name"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// MemorySuffix ends the name of the host directory beside a session's
// workspace that holds its memory mounts' sources (outside the
// workspace: the sandbox sees each only at its mount).
const MemorySuffix = ".memory"

// MemoryMountFor returns the mount of a memory store that a session whose
// workspace is the host directory workspace sees at mountPath, a
// directory of MemoryDir: its source is
// <workspace>[MemorySuffix]/<name>, made when the sandbox starts.
func MemoryMountFor(workspace, mountPath string, readOnly bool) (MemoryMount, error) {
	name := path.Base(mountPath)
	if mountPath != path.Clean(mountPath) || path.Dir(mountPath) != MemoryDir || name == "." || name == ".." || name == "/" || strings.Contains(name, "\\") {
		return MemoryMount{}, fmt.Errorf("sandbox: memory mount path %q is not a directory of %s", mountPath, MemoryDir)
	}
	return MemoryMount{Source: filepath.Join(workspace+MemorySuffix, name), Name: name, ReadOnly: readOnly}, nil
}

// checkMemory reports the first memory mount that cannot be made.
func checkMemory(mounts []MemoryMount) error {
	seen := map[string]bool{}
	for _, m := range mounts {
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("sandbox: memory source %q is not an absolute path", m.Source)
		}
		if m.Name == "" || m.Name == "." || m.Name == ".." || strings.ContainsAny(m.Name, "/\x00") {
			return fmt.Errorf("sandbox: memory mount name %q is not one path segment", m.Name)
		}
		if seen[m.Name] {
			return fmt.Errorf("sandbox: two memory mounts are named %s", m.Name)
		}
		seen[m.Name] = true
	}
	return nil
}

// CABundle is the sandbox's bundle of trusted roots when Options.ExtraCA
// is set.
const CABundle = "/etc/reins/ca-certificates.crt"

// caEnv points programs at CABundle.
func caEnv() []string {
	var env []string
	for _, name := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
		env = append(env, name+"="+CABundle)
	}
	return env
}

// A Bind makes the host directory Source visible, read-only, at Target
// inside a sandbox. Target must be a clean absolute path under
// [BindRoot]; no two binds may share a target.
type Bind struct {
	Source, Target string
}

// checkBinds reports the first bind that cannot be made.
func checkBinds(binds []Bind) error {
	seen := map[string]bool{}
	for _, b := range binds {
		if !filepath.IsAbs(b.Source) {
			return fmt.Errorf("sandbox: bind source %q is not an absolute path", b.Source)
		}
		if b.Target != filepath.Clean(b.Target) || !strings.HasPrefix(b.Target, BindRoot+"/") {
			return fmt.Errorf("sandbox: bind target %q is not a clean path under %s", b.Target, BindRoot)
		}
		for t := range seen {
			if t == b.Target || strings.HasPrefix(t, b.Target+"/") || strings.HasPrefix(b.Target, t+"/") {
				return fmt.Errorf("sandbox: bind targets %s and %s overlap", t, b.Target)
			}
		}
		seen[b.Target] = true
	}
	return nil
}

// ProcSpec describes a process to start inside a sandbox.
type ProcSpec struct {
	// Argv is the program and its arguments; a program without a slash
	// is looked up in [Path].
	Argv []string
	// Dir is the working directory inside the sandbox (default
	// [WorkspaceDir]).
	Dir string
	// Env is added to the sandbox's environment.
	Env []string
	// Stdin, Stdout and Stderr become the process's descriptors 0, 1
	// and 2.
	Stdin, Stdout, Stderr *os.File
	// Setsid starts a new session; Setctty also makes Stdin its
	// controlling terminal. Setpgid starts a new process group.
	Setsid, Setctty, Setpgid bool
}

// startTimeout bounds how long a sandbox may take to get ready.
const startTimeout = 10 * time.Second

// ErrUnavailable is returned (wrapped) when sandboxes cannot be made on
// this host; the message says why and what to do.
var ErrUnavailable = errors.New("sandboxes are unavailable on this host")

// ErrClosed is returned for operations on a sandbox that has ended.
var ErrClosed = errors.New("the sandbox has ended")

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code, or 128+signal when Signal is set.
	Code int
	// Signal is the signal that killed the process, or 0.
	Signal syscall.Signal
}

// String describes the exit.
func (e ExitStatus) String() string {
	if e.Signal != 0 {
		return "killed by " + e.Signal.String()
	}
	return "exit status " + strconv.Itoa(e.Code)
}

// envValue returns the value of name in env ("NAME=value" entries).
func envValue(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// mergeEnv returns base with the entries of add, a later entry replacing
// an earlier one of the same name.
func mergeEnv(base, add []string) []string {
	out := make([]string, 0, len(base)+len(add))
	at := map[string]int{}
	for _, kv := range append(append([]string{}, base...), add...) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := at[name]; ok {
			out[i] = kv
			continue
		}
		at[name] = len(out)
		out = append(out, kv)
	}
	return out
}
