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
}

// Workspace is a directory the tools of a session work in. Every path is
// resolved through an [os.Root] so that nothing escapes it.
type Workspace struct {
	dir     string
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
	w := &Workspace{dir: abs, root: root, opts: opts, launch: opts.Launcher}
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

// Dir returns the absolute path of the workspace directory.
func (w *Workspace) Dir() string { return w.dir }

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
	dir := w.launch.WorkspaceDir()
	env := []string{"HOME=" + dir, "PWD=" + dir, "TERM=dumb", "LANG=C.UTF-8", "PAGER=cat", "GIT_PAGER=cat"}
	return append(env, w.opts.Env...)
}

// procDir is the working directory rel (relative to the workspace) as
// launched processes see it.
func (w *Workspace) procDir(rel string) string {
	return filepath.Join(w.launch.WorkspaceDir(), rel)
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
// workspace root, refusing anything that points outside it.
func (w *Workspace) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
		if p == w.dir {
			return ".", nil
		}
		r, ok := strings.CutPrefix(p, w.dir+string(filepath.Separator))
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
