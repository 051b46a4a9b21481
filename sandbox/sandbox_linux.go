package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reinsdev/reins/sandbox/nofollow"
)

// Manager starts sandboxes and tears them down.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	cgroup *cgroups // nil when resource limits fall back to rlimits

	mu   sync.Mutex // guards live
	live map[*Sandbox]bool
}

// NewManager returns a manager. It reaps the sandboxes a killed server
// left behind (normally none: a sandbox dies with its server).
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HostUID == 0 {
		cfg.HostUID = 65534
	}
	if cfg.HostGID == 0 {
		cfg.HostGID = 65534
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	m := &Manager{cfg: cfg, log: cfg.Logger, live: map[*Sandbox]bool{}}
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox state dir: %w", err)
		}
		m.reapLeftovers()
	}
	cg, err := newCgroups(cfg.Limits)
	if err != nil {
		m.log.Warn("sandboxes are limited by rlimits only (per process, not per sandbox)", "reason", err)
	} else {
		m.cgroup = cg
		m.log.Debug("sandboxes are limited by cgroups", "version", cg.version)
	}
	return m, nil
}

// Limits reports the limits of each sandbox and how they are enforced
// ("cgroup v1", "cgroup v2" or "rlimits").
func (m *Manager) Limits() (Limits, string) {
	if m.cgroup == nil {
		return m.cfg.Limits, "rlimits"
	}
	return m.cfg.Limits, m.cgroup.version
}

// Check starts a sandbox on an empty directory and runs a program in it:
// it reports why sandboxes cannot be made here (wrapping
// [ErrUnavailable]), and how long a start took.
func (m *Manager) Check(ctx context.Context) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "reins-sandbox-check-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	sb, err := m.Start(ctx, Options{Name: "check", Workspace: dir})
	if err != nil {
		return 0, err
	}
	defer sb.Close()
	took := time.Since(t0)
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	p, err := sb.Spawn(ProcSpec{Argv: []string{"true"}, Stdin: devnull, Stdout: devnull, Stderr: devnull})
	if err != nil {
		return 0, fmt.Errorf("%w: running a program in a sandbox failed: %v", ErrUnavailable, err)
	}
	if st := p.Wait(); st.Code != 0 {
		return 0, fmt.Errorf("%w: `true` in a sandbox ended with %s", ErrUnavailable, st)
	}
	return took, nil
}

// Start makes a sandbox. It returns once the sandbox is ready to run
// processes.
func (m *Manager) Start(ctx context.Context, o Options) (*Sandbox, error) {
	if o.Name == "" || o.Workspace == "" {
		return nil, errors.New("sandbox: a sandbox needs a name and a workspace")
	}
	if err := checkBinds(o.Binds); err != nil {
		return nil, err
	}
	if err := checkMemory(o.Memory); err != nil {
		return nil, err
	}
	sb, err := m.start(ctx, o)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.live[sb] = true
	m.mu.Unlock()
	return sb, nil
}

func (m *Manager) start(ctx context.Context, o Options) (*Sandbox, error) {
	if err := m.prepareWorkspace(o.Workspace, !o.ReadOnly); err != nil {
		return nil, err
	}
	if err := m.prepareMemory(o.Memory); err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "control")
	ours, err := newConn(os.NewFile(uintptr(fds[0]), "control"), maxToServer)
	if err != nil {
		theirs.Close()
		return nil, err
	}
	cmd, cfg, err := m.initCommand(o, theirs)
	if err != nil {
		theirs.Close()
		ours.Close()
		return nil, err
	}
	// Queued on the socket for init, which reads it first.
	err = ours.send(msg{Op: opSetup, Init: cfg})
	var goAhead io.WriteCloser
	if err == nil {
		goAhead, err = cmd.StdinPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("%w: starting the sandbox failed: %v", ErrUnavailable, err)
	}
	sb := &Sandbox{m: m, name: o.Name, cmd: cmd, ctl: ours, pending: map[uint64]chan msg{},
		procs: map[int]*Process{}, early: map[int]int{}, done: make(chan struct{})}
	err = m.adopt(sb)
	if err == nil {
		_, err = goAhead.Write([]byte{1})
	}
	goAhead.Close()
	if err != nil {
		sb.teardown()
		return nil, err
	}
	if err := sb.ready(ctx, o.Egress); err != nil {
		sb.teardown()
		return nil, err
	}
	go sb.read()
	return sb, nil
}

// prepareWorkspace checks the workspace directory, creates its outputs
// directory (for a writable workspace, the first time) and, when the
// server runs as root, gives them to the sandbox's user.
func (m *Manager) prepareWorkspace(dir string, outputs bool) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("sandbox: workspace: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("sandbox: workspace %s is not a directory", dir)
	}
	// What is in the workspace may have been put there by a sandbox: it is
	// reached through the workspace's root, without following links.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	if outputs {
		err := root.Mkdir(OutputsDir, 0o755)
		switch {
		case err == nil && os.Geteuid() == 0:
			if err := root.Lchown(OutputsDir, m.cfg.HostUID, m.cfg.HostGID); err != nil {
				return fmt.Errorf("sandbox: outputs owner: %w", err)
			}
		case err != nil && !errors.Is(err, os.ErrExist):
			return fmt.Errorf("sandbox: outputs: %w", err)
		}
	}
	if os.Geteuid() != 0 || int(st.Uid) == m.cfg.HostUID {
		return nil
	}
	err = chownTree(root, m.cfg.HostUID, m.cfg.HostGID)
	if errors.Is(err, nofollow.ErrBounds) {
		m.log.Warn("the workspace is deeper than its walk goes: what lies deeper keeps its owner", "workspace", dir, "depth", chownDepth)
		err = nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: workspace owner: %w", err)
	}
	return nil
}

// prepareMemory makes the memory mounts' sources that are missing,
// checks that they are directories and, when the server runs as root,
// gives the writable ones to the sandbox's user (what their writers put
// in them later is theirs to give).
func (m *Manager) prepareMemory(mounts []MemoryMount) error {
	for _, mm := range mounts {
		if err := os.MkdirAll(mm.Source, 0o755); err != nil {
			return fmt.Errorf("sandbox: memory %s: %w", mm.Name, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(mm.Source, &st); err != nil {
			return fmt.Errorf("sandbox: memory %s: %w", mm.Name, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("sandbox: memory %s: %s is not a directory", mm.Name, mm.Source)
		}
		if mm.ReadOnly || os.Geteuid() != 0 || int(st.Uid) == m.cfg.HostUID {
			continue
		}
		root, err := os.OpenRoot(mm.Source)
		if err != nil {
			return fmt.Errorf("sandbox: memory %s: %w", mm.Name, err)
		}
		err = chownTree(root, m.cfg.HostUID, m.cfg.HostGID)
		root.Close()
		if err != nil {
			return fmt.Errorf("sandbox: memory %s owner: %w", mm.Name, err)
		}
	}
	return nil
}

// chownDepth bounds how deep chownTree goes (it keeps two descriptors open
// per level).
const chownDepth = 1024

// chownTree gives root and everything in it to uid:gid. It runs as root
// on a tree a sandbox may have written: it never follows a symbolic link
// (a link is given away itself) nor enters a directory swapped in while
// it walks (see package nofollow).
func chownTree(root *os.Root, uid, gid int) error {
	if err := root.Lchown(".", uid, gid); err != nil {
		return err
	}
	return nofollow.Walk(root, nofollow.Bounds{Depth: chownDepth}, func(d *os.Root, name, _ string, _ fs.DirEntry) error {
		return d.Lchown(name, uid, gid)
	})
}

// Uid returns the host uid that owns the files sandboxes write, and its
// gid: the configured ids when the server runs as root, else the
// server's own.
func (m *Manager) Uid() (uid, gid int) {
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid()
	}
	return m.cfg.HostUID, m.cfg.HostGID
}

// initCommand returns the command that starts the sandbox described by
// o, and init's configuration (sent on the control socket ctl).
func (m *Manager) initCommand(o Options, ctl *os.File) (*exec.Cmd, *initConfig, error) {
	env := append([]string{"PATH=" + Path, "HOME=" + WorkspaceDir, "USER=" + User, "LOGNAME=" + User,
		"LANG=C.UTF-8"}, proxyEnv(o.Egress != nil)...)
	abs, err := filepath.Abs(o.Workspace)
	if err != nil {
		return nil, nil, err
	}
	if len(o.ExtraCA) > 0 {
		env = append(env, caEnv()...)
	}
	cfg := &initConfig{Workspace: abs, SwitchUser: os.Geteuid() == 0, ReadOnly: o.ReadOnly, Env: append(env, o.Env...),
		Limits: m.cfg.Limits, Hostname: "reins", ExtraCA: string(o.ExtraCA), Binds: o.Binds, Memory: o.Memory}
	if m.cgroup != nil {
		cfg.Limits.Memory = 0 // the cgroup bounds the whole sandbox instead
	}
	uid, gid := m.Uid()
	start, err := json.Marshal(startConfig{UID: uid, GID: gid, Root: os.Geteuid() == 0})
	if err != nil {
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{startArg0, string(start)},
		Env:        []string{},
		ExtraFiles: []*os.File{ctl},
		Stderr:     &logWriter{log: m.log, sandbox: o.Name},
		// No new namespaces here: the starter makes them (see startArg0).
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	return cmd, cfg, nil
}

// proxyEnv points programs at the egress proxy.
func proxyEnv(egress bool) []string {
	if !egress {
		return nil
	}
	u := "http://" + ProxyAddr
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "ALL_PROXY=" + u, "http_proxy=" + u,
		"https_proxy=" + u, "all_proxy=" + u, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1"}
}

// adopt puts the new sandbox in its cgroup and records it for the reaper.
func (m *Manager) adopt(sb *Sandbox) error {
	pid := sb.cmd.Process.Pid
	if m.cgroup != nil {
		dirs, err := m.cgroup.add(sb.name, pid)
		if err != nil {
			return fmt.Errorf("sandbox: cgroup: %w", err)
		}
		sb.cgroups = dirs
	}
	if m.cfg.StateDir != "" {
		sb.pidFile = filepath.Join(m.cfg.StateDir, fmt.Sprintf("%d.pid", pid))
		rec, _ := json.Marshal(pidRecord{Pid: pid, Start: procStart(pid), Cgroups: sb.cgroups})
		if err := os.WriteFile(sb.pidFile, rec, 0o600); err != nil {
			return fmt.Errorf("sandbox: state: %w", err)
		}
	}
	return nil
}

// Close tears down every sandbox.
func (m *Manager) Close() error {
	m.mu.Lock()
	live := make([]*Sandbox, 0, len(m.live))
	for sb := range m.live {
		live = append(live, sb)
	}
	m.mu.Unlock()
	for _, sb := range live {
		sb.Close()
	}
	return nil
}

// logWriter logs what a sandbox's init writes to its stderr (only the
// reason of a failed setup).
type logWriter struct {
	log     *slog.Logger
	sandbox string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Warn("sandbox init", "sandbox", w.sandbox, "output", string(p[:min(len(p), 2048)]))
	return len(p), nil
}

// ready waits for init's ready message and starts the egress proxy on the
// listener it hands over.
func (sb *Sandbox) ready(ctx context.Context, egress func(net.Listener)) error {
	deadline := time.Now().Add(startTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	sb.ctl.c.SetReadDeadline(deadline)
	defer sb.ctl.c.SetReadDeadline(time.Time{})
	m, files, err := sb.ctl.recv()
	if err != nil {
		return fmt.Errorf("%w: the sandbox did not start: %v", ErrUnavailable, err)
	}
	defer closeAll(files)
	if m.Op == opFailed {
		return fmt.Errorf("%w: setting up the sandbox failed: %s", ErrUnavailable, m.Err)
	}
	if m.Op != opReady || len(files) != 1 {
		return fmt.Errorf("sandbox: unexpected %q from init", m.Op)
	}
	ln, err := net.FileListener(files[0])
	if err != nil {
		return fmt.Errorf("sandbox: proxy listener: %w", err)
	}
	sb.ln = ln
	if egress == nil {
		ln.Close() // no way out at all: connections to the proxy address are refused
		return nil
	}
	go egress(ln)
	return nil
}
