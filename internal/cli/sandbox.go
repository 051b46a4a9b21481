package cli

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/toolhost"
	"github.com/reinsdev/reins/sandbox"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// sandboxFlags are the flags of `reins serve` and `reins executor` that
// configure the sandboxes tools run in.
type sandboxFlags struct {
	mode        string
	memory      string
	processes   int
	cpu         float64
	egressAllow []string
}

// register adds the sandbox flags to f with their environment fallbacks.
func (s *sandboxFlags) register(f *pflag.FlagSet, whose string) {
	d := sandbox.DefaultLimits()
	f.StringVar(&s.mode, "sandbox", toolhost.SandboxNamespaces,
		"where "+whose+" tools run: \"namespaces\" (a sandbox per session) or \"none\" (on this host, confined by Landlock only: a trusted single-user machine) (REINS_SANDBOX)")
	f.StringVar(&s.memory, "sandbox-memory", formatBytes(d.Memory), "memory of each sandbox, e.g. 512M or 4G (REINS_SANDBOX_MEMORY)")
	f.IntVar(&s.processes, "sandbox-processes", d.Processes, "processes and threads of each sandbox (REINS_SANDBOX_PROCESSES)")
	f.Float64Var(&s.cpu, "sandbox-cpu", d.CPU, "CPUs each sandbox may use, where cgroups are available (REINS_SANDBOX_CPU)")
	f.StringSliceVar(&s.egressAllow, "egress-allow", nil,
		"internal addresses (CIDR or IP: loopback, private, link-local) that sandboxes may reach through the egress proxy anyway; refused by default (REINS_EGRESS_ALLOW)")
	bindEnv(f, []envFallback{{"sandbox", "REINS_SANDBOX"}, {"sandbox-memory", "REINS_SANDBOX_MEMORY"}, {"sandbox-processes", "REINS_SANDBOX_PROCESSES"},
		{"sandbox-cpu", "REINS_SANDBOX_CPU"}, {"egress-allow", "REINS_EGRESS_ALLOW"}}...)
}

func (s *sandboxFlags) config() (toolhost.SandboxConfig, error) {
	mem, err := parseBytes(s.memory)
	if err != nil {
		return toolhost.SandboxConfig{}, fmt.Errorf("--sandbox-memory: %w", err)
	}
	allow, err := netguard.ParseAllow(s.egressAllow)
	if err != nil {
		return toolhost.SandboxConfig{}, fmt.Errorf("--egress-allow: %w", err)
	}
	if s.mode != toolhost.SandboxNamespaces && s.mode != toolhost.SandboxNone {
		return toolhost.SandboxConfig{}, fmt.Errorf("--sandbox: %q is not \"namespaces\" or \"none\"", s.mode)
	}
	if s.processes < 1 {
		return toolhost.SandboxConfig{}, fmt.Errorf("--sandbox-processes: want at least 1, got %d", s.processes)
	}
	if s.cpu <= 0 {
		return toolhost.SandboxConfig{}, fmt.Errorf("--sandbox-cpu: want more than 0, got %g", s.cpu)
	}
	return toolhost.SandboxConfig{Mode: s.mode, EgressAllow: allow,
		Limits: sandbox.Limits{Memory: mem, Processes: s.processes, CPU: s.cpu}}, nil
}

// parseBytes reads a size such as 512M, 4G or 1048576.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (such as 512M or 4G)", s)
	}
	return n * mult, nil
}

func formatBytes(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	}
	return fmt.Sprint(n)
}

// executorSandboxes makes `reins executor` run each session's processes
// in a sandbox whose egress proxy reaches any public address (and the
// --egress-allow ones), or on this host under --sandbox=none. It returns
// what tears the sandboxes down.
func (s *sandboxFlags) executorSandboxes(ctx context.Context, sessions *executor.BuiltinSessions, workspace string, log *slog.Logger) (func(), error) {
	cfg, err := s.config()
	if err != nil {
		return nil, err
	}
	if cfg.Mode == toolhost.SandboxNone {
		log.Warn("--sandbox=none: the sessions' tools run as this user on this host (confined by Landlock only)")
		sessions.Unconfined = true
		return func() {}, nil
	}
	sb, err := executor.NewSandboxes(ctx, executor.SandboxOptions{Memory: cfg.Limits.Memory, Processes: cfg.Limits.Processes,
		CPU: cfg.Limits.CPU, EgressAllow: cfg.EgressAllow, EgressHint: "allow it with --egress-allow",
		StateDir: filepath.Join(workspace, ".reins-sandboxes"), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%w (or run with --sandbox=none on a trusted machine)", err)
	}
	sessions.Launchers = sb
	sessions.Owner = sb.Owner()
	return func() { sb.Close() }, nil
}
