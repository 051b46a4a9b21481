package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/reinsdev/reins/sandbox"
	"github.com/reinsdev/reins/sandbox/egress"
	"github.com/reinsdev/reins/sandbox/netguard"
	"github.com/reinsdev/reins/tools"
)

// ErrSandboxUnavailable is wrapped by the error of [NewSandboxes] (and so
// of [Client.Run] with the built-in toolset) when this host cannot make
// the per-session sandboxes: Linux without unprivileged user namespaces,
// or another system.
var ErrSandboxUnavailable = sandbox.ErrUnavailable

// SandboxOptions configure the sandboxes made by [NewSandboxes]. The zero
// value is a useful default: 2 GiB of memory, 512 processes and 1 CPU per
// sandbox, and an egress proxy that refuses loopback, private, link-local
// and metadata addresses.
type SandboxOptions struct {
	// Memory caps each sandbox's memory in bytes (default 2 GiB; per
	// process where no cgroup can be made).
	Memory int64
	// Processes caps each sandbox's processes and threads (default 512).
	Processes int
	// CPU caps each sandbox's CPU time in CPUs (default 1), where a
	// cgroup can be made.
	CPU float64
	// EgressAllow lists internal addresses (loopback, private,
	// link-local) that the sandboxes may reach through their egress proxy
	// anyway.
	EgressAllow []netip.Prefix
	// EgressHint tells the user of a sandbox how a refused address is
	// allowed (default "allow it with SandboxOptions.EgressAllow").
	EgressHint string
	// StateDir holds the sandboxes' bookkeeping, so that a start after a
	// crash reaps what a killed executor left behind (default none).
	StateDir string
	// Logger receives diagnostics.
	Logger *slog.Logger
}

// Sandboxes is the [LauncherFactory] that runs each session's bash,
// processes and terminals in a sandbox of its own, the one `reins
// executor` and the server's cloud sessions use: new user, PID, mount,
// network, IPC, UTS and cgroup namespaces, a root file system of the
// host's read-only system directories (no /etc/shadow, a fresh /proc)
// with the session's directory at /workspace, an unprivileged user,
// seccomp, Landlock and resource limits. Its only network is an egress
// proxy (HTTP_PROXY inside) that reaches public addresses and refuses
// internal ones unless allowed. Nothing of the executor's process reaches
// it: not its environment, not its files.
//
// A sandbox is the executor's binary re-executed: any program that links
// this package can make them, with nothing to call from main.
type Sandboxes struct {
	m      *sandbox.Manager
	guard  *netguard.Guard
	hint   string
	log    *slog.Logger
	ctx    context.Context // the egress proxies' life
	cancel context.CancelFunc
}

// NewSandboxes checks that sandboxes can be made here by starting one and
// running a program in it; its error wraps [ErrSandboxUnavailable] when
// they cannot, and says why. Close tears every sandbox down.
func NewSandboxes(ctx context.Context, o SandboxOptions) (*Sandboxes, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.EgressHint == "" {
		o.EgressHint = "allow it with SandboxOptions.EgressAllow"
	}
	m, err := sandbox.NewManager(sandbox.Config{
		Limits:   sandbox.Limits{Memory: o.Memory, Processes: o.Processes, CPU: o.CPU},
		StateDir: o.StateDir, Logger: o.Logger,
	})
	if err == nil {
		if _, err = m.Check(ctx); err != nil {
			m.Close()
		}
	}
	if err != nil {
		if errors.Is(err, ErrSandboxUnavailable) {
			return nil, fmt.Errorf("executor: %w", err)
		}
		return nil, fmt.Errorf("executor: %w: %w", ErrSandboxUnavailable, err)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Sandboxes{m: m, guard: &netguard.Guard{Allow: o.EgressAllow}, hint: o.EgressHint,
		log: o.Logger, ctx: pctx, cancel: cancel}, nil
}

// Launcher implements [LauncherFactory]: the session's sandbox starts
// with its first process.
func (s *Sandboxes) Launcher(_ context.Context, a Assignment, dir string) (tools.Launcher, error) {
	memory, err := memoryMounts(a, dir)
	if err != nil {
		return nil, err
	}
	return s.m.Launcher(sandbox.Options{Name: a.SessionID, Workspace: dir, ReadOnly: a.Workspace.ReadOnly, Memory: memory,
		Egress: func(ln net.Listener) {
			p := &egress.Proxy{Policy: egress.Policy{Unrestricted: true}, Guard: s.guard, Logger: s.log, AllowHint: s.hint}
			p.Serve(s.ctx, ln)
		}}), nil
}

// Owner is the host user the sandboxes' processes run as: the owner of
// the files the built-in file tools create beside them.
func (s *Sandboxes) Owner() *tools.Owner {
	uid, gid := s.m.Uid()
	return &tools.Owner{UID: uid, GID: gid}
}

// Close tears every sandbox down, with everything running in it.
func (s *Sandboxes) Close() error {
	s.cancel()
	return s.m.Close()
}

var _ LauncherFactory = (*Sandboxes)(nil)
