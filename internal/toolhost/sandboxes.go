package toolhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/packages"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/vault"
	"github.com/reinsdev/reins/internal/webfetch"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
	"github.com/reinsdev/reins/sandbox/egress"
	"github.com/reinsdev/reins/sandbox/netguard"
	"github.com/reinsdev/reins/tools"
)

// Sandbox modes.
const (
	// SandboxNamespaces runs each cloud session's tools in a sandbox of
	// Linux namespaces (the default).
	SandboxNamespaces = "namespaces"
	// SandboxNone runs them on the server's host, confined by Landlock
	// only: for a trusted, single-user machine.
	SandboxNone = "none"
)

// SandboxConfig configures the sandboxes of cloud sessions.
type SandboxConfig struct {
	// Mode is SandboxNamespaces (default) or SandboxNone.
	Mode string
	// Limits bound each sandbox (zero fields: sandbox.DefaultLimits).
	Limits sandbox.Limits
	// EgressAllow are internal addresses (loopback, private, link-local)
	// that the egress proxy may reach anyway, e.g. a test server on
	// 127.0.0.1. Public addresses need no entry.
	EgressAllow []netip.Prefix
	// CleartextCredentialHosts are hosts (names, IP addresses or
	// "*.domain") to which the egress proxy substitutes credentials in
	// plain http:// requests too, e.g. a git server on the local network
	// that has no TLS. Elsewhere credentials go over TLS only.
	CleartextCredentialHosts []string
	// MemoryBudget and ProcessBudget are the memory and processes all
	// cloud sessions' sandboxes may use together (zero: this machine's
	// memory, half its thread limit): the server runs the tools of as
	// many sessions at once as the budgets hold sandboxes of Limits;
	// more wait in line, and idle sessions give their slots up to them.
	MemoryBudget  int64
	ProcessBudget int
}

// PackagesConfig configures the installs of cloud environments' packages
// (config.packages).
type PackagesConfig struct {
	// PipIndexURL and NpmRegistry, when set, replace PyPI's index and the
	// npm registry, e.g. with an organization's mirrors (see
	// [CheckMirrorURL]). Installs may reach their hosts as well as the
	// public registries; a mirror on an internal address also needs an
	// entry in SandboxConfig.EgressAllow.
	PipIndexURL, NpmRegistry string
}

// hosts returns the hosts of the configured mirrors.
func (c PackagesConfig) hosts() []string {
	var hosts []string
	for _, raw := range []string{c.PipIndexURL, c.NpmRegistry} {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			hosts = append(hosts, u.Hostname())
		}
	}
	return hosts
}

// CheckMirrorURL reports whether raw can be a package mirror's URL: an
// absolute http or https URL with a host.
func CheckMirrorURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("%q is not an absolute http or https URL", raw)
	}
	return nil
}

// egressAllowHint follows a refusal of an internal address.
const egressAllowHint = "an operator can allow it with --egress-allow"

// cleartextHint follows a refusal of a credential in a plain http://
// request.
const cleartextHint = "an operator can allow cleartext credentials for a host with --egress-cleartext-credentials"

// sandboxes makes the sandboxes of cloud sessions, one per session, and
// serves each one's egress proxy with its environment's network policy.
// It is a service: Stop ends the proxies and the package installs in
// flight; closeAll then tears down every sandbox.
type sandboxes struct {
	m     *sandbox.Manager
	pkgs  *packages.Installer
	st    sandboxStore
	guard *netguard.Guard
	log   *slog.Logger
	life  service.Base // its context is the proxies' lifetime; owns the closes of replaced launchers

	cleartext []string // SandboxConfig.CleartextCredentialHosts

	cas *caStore // per-environment CAs of the proxies that substitute credentials

	mu          sync.Mutex                // guards the maps below
	launchers   map[string]tools.Launcher // by session id
	credentials map[string]*credentialSet // by session id
}

// newSandboxes returns nil when cfg.Mode is SandboxNone.
func newSandboxes(cfg SandboxConfig, pkgs PackagesConfig, st sandboxStore, keys *vault.Keyring, dataDir string, log *slog.Logger) (*sandboxes, error) {
	switch cfg.Mode {
	case "", SandboxNamespaces:
	case SandboxNone:
		return nil, nil
	default:
		return nil, fmt.Errorf("sandbox mode %q: use %q or %q", cfg.Mode, SandboxNamespaces, SandboxNone)
	}
	m, err := sandbox.NewManager(sandbox.Config{Limits: cfg.Limits, StateDir: filepath.Join(dataDir, "sandboxes"), Logger: log})
	if err != nil {
		return nil, err
	}
	s := &sandboxes{m: m, st: st, guard: &netguard.Guard{Allow: cfg.EgressAllow}, log: log, cleartext: cfg.CleartextCredentialHosts,
		cas:       &caStore{dir: filepath.Join(dataDir, "ca"), keys: keys, cas: map[string]*egress.CA{}},
		launchers: map[string]tools.Launcher{}, credentials: map[string]*credentialSet{}}
	// Installs reach the package registries and the operator's mirrors
	// only, whatever else the environment's networking allows.
	installHosts := append(egress.PackageRegistryHosts(), pkgs.hosts()...)
	s.pkgs = &packages.Installer{Sandboxes: m, Dir: filepath.Join(dataDir, "packages"), Logger: log,
		PipIndexURL: pkgs.PipIndexURL, NpmRegistry: pkgs.NpmRegistry,
		Egress: func(ln net.Listener) {
			s.serveEgress(ln, &egress.Proxy{Policy: egress.Policy{AllowedHosts: installHosts},
				Guard: s.guard, Logger: log.With("packages", true), AllowHint: egressAllowHint})
		}}
	return s, nil
}

// Start checks the sandboxes (see check) and starts the package
// installer.
func (s *sandboxes) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return err
	}
	s.check(ctx)
	return s.pkgs.Start(ctx)
}

// Stop cancels the package installs in flight and waits for them (the
// tool calls waiting for them fail), ends the egress proxies and waits
// for the launchers being closed. The sandboxes stay up until closeAll,
// once the executors whose tools run in them have stopped.
func (s *sandboxes) Stop(ctx context.Context) error {
	return errors.Join(s.pkgs.Stop(ctx), s.life.Halt(ctx))
}

// closeAll tears down every sandbox.
func (s *sandboxes) closeAll() { s.m.Close() }

// check makes one sandbox and runs a program in it, so that `reins
// serve` says at start whether cloud sessions' tools can run.
func (s *sandboxes) check(ctx context.Context) {
	took, err := s.m.Check(ctx)
	if err != nil {
		s.log.Error("SANDBOXES ARE UNAVAILABLE: cloud sessions' tool calls will fail with this error until it is fixed (or run with --sandbox=none on a trusted single-user machine)", "err", err)
		return
	}
	limits, how := s.m.Limits()
	s.log.Info("cloud sessions' tools run in sandboxes", "start", took.Round(time.Millisecond),
		"memory", limits.Memory, "processes", limits.Processes, "cpu", limits.CPU, "limits", how)
}

// Launcher implements executor.LauncherFactory: the session's processes
// run in its own sandbox, started on the first tool call that needs one,
// with the environment's packages, installed first if they are not yet
// (on that call too, not while the session is being assigned).
func (s *sandboxes) Launcher(ctx context.Context, a executor.Assignment, dir string) (tools.Launcher, error) {
	env, err := s.st.GetEnvironment(ctx, a.EnvironmentID)
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", a.EnvironmentID, err)
	}
	policy, err := s.policy(ctx, a, &env)
	if err != nil {
		return nil, err
	}
	p := &egress.Proxy{Policy: policy, Guard: s.guard, Logger: s.log.With("session", a.SessionID), AllowHint: egressAllowHint,
		MaskResponses: true, CleartextHosts: s.cleartext, CleartextHint: cleartextHint}
	opts := sandbox.Options{
		Name: a.SessionID, Workspace: dir, ReadOnly: a.Workspace.ReadOnly,
		Egress: func(ln net.Listener) { s.serveEgress(ln, p) },
	}
	if opts.Memory, err = s.memory(ctx, a.SessionID, dir); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if set := s.credentials[a.SessionID]; set != nil {
		p.Credentials, p.CredentialSource = set.get(), set.get
	}
	s.mu.Unlock()
	if len(p.Credentials) > 0 {
		// Substituting credentials in HTTPS requests means terminating
		// TLS: the sandbox trusts its environment's CA.
		if p.CA, err = s.cas.get(a.EnvironmentID); err != nil {
			return nil, err
		}
		opts.ExtraCA = p.CA.CertPEM()
	}
	l := &preparing{prepare: func() (*sandbox.Launcher, error) {
		layer, err := s.packages(s.life.Context(), a, &env)
		if err != nil {
			return nil, err
		}
		opts.Binds, opts.Env = layer.Bind(), layer.Env
		return s.m.Launcher(opts), nil
	}}
	s.mu.Lock()
	old := s.launchers[a.SessionID]
	s.launchers[a.SessionID] = l
	s.mu.Unlock()
	if old != nil && !s.life.Go(func(context.Context) { old.Close() }) {
		old.Close() // stopping: nothing waits for the placement any more
	}
	return l, nil
}

// memory returns the sandbox's mounts of the session's memory stores.
func (s *sandboxes) memory(ctx context.Context, sessionID, dir string) ([]sandbox.MemoryMount, error) {
	sess, err := s.st.GetSession(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", sessionID, err)
	}
	mounts, err := memoryMounts(&sess, dir)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.MemoryMount, len(mounts))
	for i, m := range mounts {
		out[i] = m.mount
	}
	return out, nil
}

// preparing is a launcher whose sandbox launcher is made on the first
// launch, after what it needs (the environment's packages) is ready.
type preparing struct {
	prepare func() (*sandbox.Launcher, error)

	mu     sync.Mutex // guards the fields below
	l      *sandbox.Launcher
	closed bool
}

func (p *preparing) WorkspaceDir() string { return sandbox.WorkspaceDir }

// PathAliases implements tools.PathAliaser.
func (p *preparing) PathAliases() map[string]string { return sandbox.PathAliases() }

func (p *preparing) Launch(spec tools.LaunchSpec) (tools.Proc, error) {
	l, err := p.launcher()
	if err != nil {
		return nil, err
	}
	return l.Launch(spec)
}

func (p *preparing) launcher() (*sandbox.Launcher, error) {
	p.mu.Lock()
	l, closed := p.l, p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return nil, sandbox.ErrClosed
	case l != nil:
		return l, nil
	}
	// Not under the lock: an install may take minutes, and Close must
	// not wait for it. Concurrent first launches share the install.
	l, err := p.prepare()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.l != nil {
		l.Close() // nothing was started in it yet
		if p.closed {
			return nil, sandbox.ErrClosed
		}
	} else {
		p.l = l
	}
	return p.l, nil
}

func (p *preparing) Close() error {
	p.mu.Lock()
	l := p.l
	p.closed = true
	p.mu.Unlock()
	if l != nil {
		return l.Close()
	}
	return nil
}

func (s *sandboxes) serveEgress(ln net.Listener, p *egress.Proxy) {
	ctx := s.life.Context()
	if err := p.Serve(ctx, ln); err != nil && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
		p.Logger.Debug("egress proxy stopped", "err", err)
	}
}

// setCredentials records the credentials the egress proxy of a session's
// next sandbox substitutes.
func (s *sandboxes) setCredentials(sessionID string, creds []egress.Credential) {
	s.mu.Lock()
	if creds == nil {
		delete(s.credentials, sessionID)
	} else {
		s.credentials[sessionID] = &credentialSet{creds: creds}
	}
	s.mu.Unlock()
}

// rotateCredential replaces a credential's value for the session's
// current placement: its sandbox's proxy substitutes the new value from
// its next request.
func (s *sandboxes) rotateCredential(sessionID, old, value string) {
	s.mu.Lock()
	set := s.credentials[sessionID]
	s.mu.Unlock()
	if set != nil {
		set.rotate(old, value)
	}
}

// credentialSet is the credentials of one placement of a session, which
// its proxy reads at each request.
type credentialSet struct {
	mu    sync.Mutex // guards creds
	creds []egress.Credential
}

func (c *credentialSet) get() []egress.Credential {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creds
}

// rotate replaces the value old with value (copying: a request may be
// reading the slice).
func (c *credentialSet) rotate(old, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := slices.Clone(c.creds)
	for i := range next {
		if next[i].Value == old {
			next[i].Value = value
		}
	}
	c.creds = next
}

// packages returns the layer of the environment's packages, installing
// it once per version of the environment.
func (s *sandboxes) packages(ctx context.Context, a executor.Assignment, env *ma.Environment) (packages.Layer, error) {
	p := env.Config.Packages
	if n := env.Config.Networking; !packages.Empty(p) && n != nil && n.Type == "limited" && (n.AllowPackageManagers == nil || !*n.AllowPackageManagers) {
		return packages.Layer{}, fmt.Errorf("environment %s: its packages cannot be installed: its networking is limited and does not allow package managers (allow_package_managers)", env.ID)
	}
	log := s.log.With("environment", env.ID, "session", a.SessionID)
	layer, err := s.pkgs.Ensure(ctx, packages.Key(env.ID, p), p, func(msg string) { log.Info("packages: " + msg) })
	if err != nil {
		return packages.Layer{}, fmt.Errorf("environment %s: installing its packages: %w", env.ID, err)
	}
	return layer, nil
}

// policy is the environment's network policy as the egress proxy applies
// it. Environment changes apply to sandboxes started afterwards.
func (s *sandboxes) policy(ctx context.Context, a executor.Assignment, env *ma.Environment) (egress.Policy, error) {
	return sessions.NetworkPolicy(env, func() (*ma.Session, error) {
		sess, err := s.st.GetSession(ctx, a.SessionID)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", a.SessionID, err)
		}
		return &sess, nil
	})
}

// WebFetchPolicy is the network policy of web_fetch calls: that of the
// session's environment.
func WebFetchPolicy(st interface {
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
}) webfetch.PolicyFunc {
	return func(ctx context.Context, sess *ma.Session) (egress.Policy, error) {
		env, err := st.GetEnvironment(ctx, sess.EnvironmentID)
		if err != nil {
			return egress.Policy{}, fmt.Errorf("environment %s: %w", sess.EnvironmentID, err)
		}
		return sessions.NetworkPolicy(&env, func() (*ma.Session, error) { return sess, nil })
	}
}

// end tears down a session's sandbox and waits for it.
func (s *sandboxes) end(sessionID string) {
	s.mu.Lock()
	l := s.launchers[sessionID]
	delete(s.launchers, sessionID)
	delete(s.credentials, sessionID)
	s.mu.Unlock()
	if l != nil {
		l.Close()
	}
}

// owner is who must own the files the file tools write, so that the
// sandboxed processes can change them.
func (s *sandboxes) owner() (uid, gid int) { return s.m.Uid() }
