package packages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/service"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
)

// DefaultTimeout bounds one layer's install when Installer.Timeout is
// zero.
const DefaultTimeout = 15 * time.Minute

// A Layer is an installed set of packages.
type Layer struct {
	// Dir is the host directory to bind read-only at
	// [sandbox.PackagesDir]; empty when there is nothing to bind.
	Dir string
	// Env is what the sandbox's processes need to find the packages
	// (PYTHONPATH, NODE_PATH, GEM_PATH, PATH), with the layer bound at
	// [sandbox.PackagesDir].
	Env []string
}

// Bind returns the sandbox bind of the layer, or nil when there is none.
func (l Layer) Bind() []sandbox.Bind {
	if l.Dir == "" {
		return nil
	}
	return []sandbox.Bind{{Source: l.Dir, Target: sandbox.PackagesDir}}
}

// ErrStopped is the error of an install that could not start because the
// installer is not running (before Start, after Stop).
var ErrStopped = errors.New("packages: the installer is stopped")

// An Installer installs layers, each once, by running the package
// managers in a sandbox whose workspace is the layer being staged. It is
// a service: installs run between Start and Stop, and Stop cancels those
// in flight. Its fields must not change once it is in use; it is safe
// for concurrent use.
type Installer struct {
	// Sandboxes starts the install sandboxes.
	Sandboxes *sandbox.Manager
	// Dir holds the layers, one directory per key.
	Dir string
	// Egress serves the install sandbox's egress proxy (see
	// [sandbox.Options.Egress]); the package managers reach their
	// registries through it.
	Egress func(ln net.Listener)
	// Logger receives the installs' outcomes; nil discards them.
	Logger *slog.Logger
	// Timeout bounds one install (default [DefaultTimeout]).
	Timeout time.Duration

	// PipIndexURL, NpmRegistry, GoProxy and GoSumDB replace the package
	// managers' default registries when set.
	PipIndexURL, NpmRegistry, GoProxy, GoSumDB string

	life service.Base // owns the installs' goroutines

	mu       sync.Mutex          // guards inflight
	inflight map[string]*install // by key
}

// Start lets Ensure run installs.
func (i *Installer) Start(ctx context.Context) error {
	_, err := i.life.Begin(ctx)
	return err
}

// Stop cancels the installs in flight and waits for them to end (or for
// ctx to). A cancelled install leaves no layer, only its staging
// directory removed: the next Ensure of its key, after the next Start,
// installs it again. Ensure fails with ErrStopped after Stop.
func (i *Installer) Stop(ctx context.Context) error { return i.life.Halt(ctx) }

// install is one layer being installed; done closes when layer and err
// are set.
type install struct {
	done  chan struct{}
	layer Layer
	err   error
}

// Ensure returns the layer of p under key (see [Key]), installing it
// first unless it already is. Concurrent calls for one key share one
// install. progress, if not nil, receives short lines about the install.
// The install runs to its end (or its Timeout, or Stop) even if ctx ends
// first; Ensure then returns ctx's error.
func (i *Installer) Ensure(ctx context.Context, key string, p *ma.Packages, progress func(msg string)) (Layer, error) {
	if Empty(p) {
		return Layer{}, nil
	}
	if err := checkKey(key); err != nil {
		return Layer{}, err
	}
	if progress == nil {
		progress = func(string) {}
	}
	final := filepath.Join(i.Dir, key)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return layerOf(final, p), nil
	}
	in, started := i.join(key)
	if started {
		if !i.life.Go(func(ctx context.Context) { i.run(ctx, in, key, p, progress) }) {
			i.finish(in, key, Layer{}, ErrStopped)
		}
	} else {
		progress("waiting for the packages being installed for another session")
	}
	select {
	case <-in.done:
		return in.layer, in.err
	case <-ctx.Done():
		return Layer{}, ctx.Err()
	}
}

// join returns the install of key, and whether the caller started it.
func (i *Installer) join(key string) (*install, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if in := i.inflight[key]; in != nil {
		return in, false
	}
	if i.inflight == nil {
		i.inflight = map[string]*install{}
	}
	in := &install{done: make(chan struct{})}
	i.inflight[key] = in
	return in, true
}

// run installs the layer and releases its waiters.
func (i *Installer) run(ctx context.Context, in *install, key string, p *ma.Packages, progress func(string)) {
	timeout := i.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	layer, err := i.install(ctx, key, p, progress)
	i.finish(in, key, layer, err)
}

// finish records the outcome of the install of key and releases its
// waiters; the next Ensure of key starts anew.
func (i *Installer) finish(in *install, key string, layer Layer, err error) {
	in.layer, in.err = layer, err
	i.mu.Lock()
	delete(i.inflight, key)
	i.mu.Unlock()
	close(in.done)
}

// install stages the layer in a fresh directory and renames it into
// place once every manager has succeeded, so a layer directory is always
// complete. A staging directory left by a crash is removed first.
func (i *Installer) install(ctx context.Context, key string, p *ma.Packages, progress func(string)) (Layer, error) {
	final := filepath.Join(i.Dir, key)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		return layerOf(final, p), nil // installed while this call was joining
	}
	if err := Validate(p); err != nil {
		return Layer{}, err
	}
	staging := filepath.Join(i.Dir, ".staging-"+key)
	if err := os.RemoveAll(staging); err != nil {
		return Layer{}, fmt.Errorf("packages: remove a leftover staging directory: %w", err)
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return Layer{}, fmt.Errorf("packages: %w", err)
	}
	t0 := time.Now()
	err := i.installIn(ctx, key, staging, p, progress)
	if err == nil {
		err = os.Rename(staging, final)
	}
	if err != nil {
		os.RemoveAll(staging)
		i.logger().Warn("installing packages failed", "layer", key, "err", err)
		return Layer{}, err
	}
	took := time.Since(t0).Round(100 * time.Millisecond)
	progress(fmt.Sprintf("installed in %s", took))
	i.logger().Info("installed packages", "layer", key, "took", took)
	return layerOf(final, p), nil
}

// installIn runs each manager that has packages in one sandbox whose
// workspace is staging.
func (i *Installer) installIn(ctx context.Context, key, staging string, p *ma.Packages, progress func(string)) error {
	sb, err := i.Sandboxes.Start(ctx, sandbox.Options{Name: "packages-" + key, Workspace: staging, Egress: i.Egress,
		// Nothing the managers fetch is local: even a loopback mirror
		// is reached through the proxy, which alone can reach the host.
		Env: []string{"HOME=/tmp", "NO_PROXY=", "no_proxy="}})
	if err != nil {
		return fmt.Errorf("packages: %w", err)
	}
	defer sb.Close()
	for _, m := range managers() {
		specs := m.specs(p)
		if len(specs) == 0 {
			continue
		}
		progress(fmt.Sprintf("installing %d %s %s: %s", len(specs), m.name, plural(len(specs), "package"), strings.Join(specs, ", ")))
		if err := i.runManager(ctx, sb, m, specs); err != nil {
			return err
		}
	}
	return nil
}

// runManager runs one manager's install command and waits for it.
func (i *Installer) runManager(ctx context.Context, sb *sandbox.Sandbox, m manager, specs []string) error {
	dir := path.Join(sandbox.WorkspaceDir, m.name)
	var env []string
	if m.env != nil {
		env = m.env(i, dir)
	}
	out := &tail{max: 64 << 10}
	st, err := runIn(ctx, sb, m.argv(i, dir, specs), env, out)
	if err != nil {
		return fmt.Errorf("%s install failed for %s: %w", m.name, strings.Join(specs, " "), err)
	}
	if st.Code != 0 || st.Signal != 0 {
		i.logger().Warn("package manager failed", "manager", m.name, "status", st.String(), "output", out.String())
		return fmt.Errorf("%s install failed for %s (%s): %s", m.name, strings.Join(specs, " "), st, out.lastLines(8, 1500))
	}
	return nil
}

// runIn runs argv in sb with its output copied to out, until it ends or
// ctx does.
func runIn(ctx context.Context, sb *sandbox.Sandbox, argv, env []string, out io.Writer) (sandbox.ExitStatus, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer r.Close()
	proc, err := sb.Spawn(sandbox.ProcSpec{Argv: argv, Env: env, Stdin: devnull, Stdout: w, Stderr: w, Setsid: true})
	w.Close()
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	copied := make(chan struct{})
	go func() { io.Copy(out, r); close(copied) }()
	select {
	case <-proc.Done():
	case <-ctx.Done():
		sb.Close()
		<-copied
		return sandbox.ExitStatus{}, ctx.Err()
	}
	<-copied
	return proc.Wait(), nil
}

// layerOf is the layer at dir holding p.
func layerOf(dir string, p *ma.Packages) Layer {
	var env, bins []string
	for _, m := range managers() {
		if len(m.specs(p)) == 0 || m.argv == nil {
			continue
		}
		in := path.Join(sandbox.PackagesDir, m.name)
		if m.layerEnv != nil {
			env = append(env, m.layerEnv(in)...)
		}
		bins = append(bins, path.Join(in, m.bin))
	}
	env = append(env, "PATH="+strings.Join(append(bins, sandbox.Path), ":"))
	return Layer{Dir: dir, Env: env}
}

// checkKey refuses a key that is not a single path element.
func checkKey(key string) error {
	if key == "" || key != filepath.Base(key) || strings.HasPrefix(key, ".") {
		return fmt.Errorf("packages: %q is not a layer key", key)
	}
	return nil
}

func (i *Installer) logger() *slog.Logger {
	if i.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return i.Logger
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int

	mu sync.Mutex // guards b
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// lastLines returns the last n non-blank lines, at most max bytes.
func (t *tail) lastLines(n, max int) string {
	var lines []string
	all := strings.Split(t.String(), "\n")
	for j := len(all) - 1; j >= 0 && len(lines) < n; j-- {
		if l := strings.TrimSpace(all[j]); l != "" {
			lines = append([]string{l}, lines...)
		}
	}
	s := strings.Join(lines, "\n")
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	if s == "" {
		return "no output"
	}
	return s
}
