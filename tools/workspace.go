package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// DefaultMaxOutputBytes caps the text of one tool result.
const DefaultMaxOutputBytes = 100 << 10

// WorkspaceOptions configure a [Workspace]. The zero value is a writable,
// sandboxed workspace with the default output cap.
type WorkspaceOptions struct {
	// ReadOnly refuses every mutation with "workspace_read_only".
	ReadOnly bool
	// MaxOutputBytes caps the text of one tool result (default
	// DefaultMaxOutputBytes); longer output ends with a truncation marker.
	MaxOutputBytes int
	// NoSandbox runs bash and processes without Landlock even where the
	// kernel supports it.
	NoSandbox bool
	// Env adds variables ("NAME=value") to the environment of bash and
	// processes (for example a session's credentials).
	Env []string
	// Logger receives diagnostics, such as whether Landlock is in force.
	Logger *slog.Logger
	// Launcher, if set, starts bash, processes and terminals (a sandbox);
	// the workspace closes it. By default they run on the host, confined
	// by Landlock unless NoSandbox is set.
	Launcher Launcher
	// VisibleDir is the absolute path at which bash and processes see the
	// workspace, when a sandbox mounts it elsewhere (for example
	// "/workspace"); the default is the Launcher's WorkspaceDir, else the
	// workspace directory itself. The
	// file tools take absolute paths under either, and never print the
	// host path.
	VisibleDir string
	// Owner, if set, is given every file and directory the file tools
	// create, so that a bash running as another user can change them.
	// Existing files keep their owner. Giving files away needs privilege
	// (CAP_CHOWN), typically a server running as root.
	Owner *Owner
}

// Owner is the numeric user and group that files belong to.
type Owner struct{ UID, GID int }

// Workspace is a directory the tools of a session work in. Every path is
// resolved through an [os.Root] so that nothing escapes it.
type Workspace struct {
	dir     string
	visible string // the path at which the sandbox sees dir
	tmp     string // private TMPDIR of bash and processes, outside the workspace
	root    *os.Root
	opts    WorkspaceOptions
	sandbox *sandbox
	launch  Launcher
}

// OpenWorkspace opens the existing directory dir as a workspace.
func OpenWorkspace(dir string, opts WorkspaceOptions) (*Workspace, error) {
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.VisibleDir != "" && !filepath.IsAbs(opts.VisibleDir) {
		return nil, fmt.Errorf("tools: workspace visible directory %q is not an absolute path", opts.VisibleDir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: workspace %s: %w", dir, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("tools: open workspace: %w", err)
	}
	w := &Workspace{dir: abs, visible: abs, root: root, opts: opts, launch: opts.Launcher}
	switch {
	case opts.VisibleDir != "":
		w.visible = filepath.Clean(opts.VisibleDir)
	case w.launch != nil:
		w.visible = w.launch.WorkspaceDir()
	}
	if w.launch != nil {
		return w, nil
	}
	w.launch = hostLauncher{w}
	// Programs need a writable temporary directory, and under Landlock /tmp
	// is out of reach: each workspace gets a private one.
	if tmp, err := os.MkdirTemp("", "reins-tmp-"); err == nil {
		w.tmp = tmp
	}
	if !opts.NoSandbox {
		w.sandbox = newSandbox(abs, opts.ReadOnly, w.tmp, opts.Logger)
	}
	return w, nil
}

// Dir returns the absolute path of the workspace directory on the host.
func (w *Workspace) Dir() string { return w.dir }

// VisibleDir returns the absolute path at which bash and processes see the
// workspace: [WorkspaceOptions.VisibleDir], or else [Workspace.Dir].
func (w *Workspace) VisibleDir() string { return w.visible }

// ReadOnly reports whether the workspace refuses mutation.
func (w *Workspace) ReadOnly() bool { return w.opts.ReadOnly }

// Sandboxed reports whether bash and processes run confined: in a
// sandbox, or on the host under Landlock.
func (w *Workspace) Sandboxed() bool {
	return w.opts.Launcher != nil || w.sandbox != nil && w.sandbox.enabled()
}

// env is the environment the workspace gives bash, processes and
// terminals (the launcher adds PATH and the like).
func (w *Workspace) env() []string {
	dir := w.visible
	env := []string{"HOME=" + dir, "PWD=" + dir, "TERM=dumb", "LANG=C.UTF-8", "PAGER=cat", "GIT_PAGER=cat"}
	return append(env, w.opts.Env...)
}

// procDir is the working directory rel (relative to the workspace) as
// launched processes see it.
func (w *Workspace) procDir(rel string) string {
	return filepath.Join(w.visible, rel)
}

// Close releases the workspace's root and closes its launcher.
func (w *Workspace) Close() error {
	w.launch.Close()
	if w.sandbox != nil {
		w.sandbox.close()
	}
	if w.tmp != "" {
		os.RemoveAll(w.tmp)
	}
	return w.root.Close()
}

// rel turns a path given by the model into a path relative to the
// workspace root, refusing anything that points outside it. An absolute
// path may be under the host directory or under the visible one.
func (w *Workspace) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
		r, ok := cutDir(p, w.dir)
		if !ok {
			r, ok = cutDir(p, w.visible)
		}
		if !ok {
			r, ok = w.alias(p)
		}
		if !ok {
			return "", errorf(CodeWorkspaceBoundary, "path %s is outside the workspace", p)
		}
		p = r
	}
	c := filepath.Clean(p)
	if !filepath.IsLocal(c) && c != "." {
		return "", errorf(CodeWorkspaceBoundary, "path %s is outside the workspace", p)
	}
	return c, nil
}

// alias maps the clean absolute path p under a path alias of the
// launcher (see [PathAliaser]) into the workspace.
func (w *Workspace) alias(p string) (string, bool) {
	a, ok := w.launch.(PathAliaser)
	if !ok {
		return "", false
	}
	for abs, dir := range a.PathAliases() {
		if r, ok := cutDir(p, abs); ok {
			return filepath.Join(dir, r), true
		}
	}
	return "", false
}

// cutDir returns the clean absolute path p relative to the directory dir,
// and whether p is dir or under it.
func cutDir(p, dir string) (string, bool) {
	if p == dir {
		return ".", true
	}
	return strings.CutPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

func (w *Workspace) mutable() error {
	if w.opts.ReadOnly {
		return errorf(CodeWorkspaceReadOnly, "the workspace is read-only")
	}
	return nil
}

// fsError turns a file system error into a tool error.
func fsError(p string, err error) error {
	if err == nil {
		return nil
	}
	var te *Error
	if errors.As(err, &te) {
		return err
	}
	switch {
	case strings.Contains(err.Error(), "path escapes from parent"):
		return errorf(CodeWorkspaceBoundary, "path %s resolves outside the workspace", p)
	case errors.Is(err, fs.ErrNotExist):
		return errorf(CodeNotFound, "%s does not exist", p)
	}
	return &Error{Code: CodeToolFailed, Msg: p, Err: stripPath(err)}
}

// stripPath drops the absolute path from a *fs.PathError so that results
// speak in workspace paths.
func stripPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
