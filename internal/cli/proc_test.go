package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/reinsdev/reins/internal/testnet"
)

// asReinsEnv makes the test binary run main: the tests' `reins` command.
const asReinsEnv = "REINS_TEST_AS_REINS"

// reinsDir returns a directory holding `reins`, a link to this test binary
// that runs as the real command (see TestMain), for PATH.
func reinsDir(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "reins")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// reinsEnv is a clean environment for `reins` processes: the person's
// REINS_* and ANTHROPIC_* variables left out, PATH with reinsDir first.
func reinsEnv(t *testing.T, dir string, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "REINS_") || strings.HasPrefix(name, "ANTHROPIC_") || strings.HasPrefix(name, "OPENAI_") || name == "PATH" || name == "NO_COLOR" || name == "XDG_DATA_HOME" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, asReinsEnv+"=1", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return append(env, extra...)
}

// freePort returns a loopback address nothing listens on.
func freePort(t *testing.T) string { return testnet.FreeAddr(t) }

// lookPath finds name in the PATH of env (exec.Command looks in the test's
// own PATH).
func lookPath(t *testing.T, env []string, name string) string {
	t.Helper()
	for _, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(path) {
				p := filepath.Join(dir, name)
				if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
					return p
				}
			}
		}
	}
	t.Fatalf("no %s in the PATH of the environment", name)
	return ""
}

// termProc is a process on a pseudo-terminal of its own (its controlling
// terminal: Ctrl-C typed there interrupts it).
type termProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{} // closed when the output ends
	exit chan error
}

func startOnTerminal(t *testing.T, env []string, name string, args ...string) *termProc {
	t.Helper()
	cmd := exec.Command(lookPath(t, env, name), args...)
	cmd.Env = env
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatalf("start %s on a pseudo-terminal: %v", name, err)
	}
	p := &termProc{t: t, cmd: cmd, ptmx: ptmx, done: make(chan struct{}), exit: make(chan error, 1)}
	go func() {
		defer close(p.done)
		r := bufio.NewReader(ptmx)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { p.exit <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill() // an error when it has exited already
		ptmx.Close()
	})
	return p
}

// output is everything the process wrote so far.
func (p *termProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the output matches re and returns the match.
func (p *termProc) waitFor(re string, timeout time.Duration) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(p.output()); m != nil {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("no %q within %s; output:\n%s", re, timeout, p.output())
	return nil
}

// typeText types on the terminal.
func (p *termProc) typeText(s string) {
	if _, err := io.WriteString(p.ptmx, s); err != nil {
		p.t.Fatalf("type %q: %v", s, err)
	}
}

// wait waits for the process to exit and returns its exit status.
func (p *termProc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case err := <-p.exit:
		<-p.done
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			p.t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(timeout):
		p.cmd.Process.Signal(syscall.SIGQUIT)
		p.t.Fatalf("still running after %s; output:\n%s", timeout, p.output())
		return -1
	}
}

// serveProc is `reins serve` in a process of its own.
type serveProc struct {
	*termProc
	url, dataDir, key string
}

// startServe starts `reins serve` on addr with the data dir and waits
// until it serves.
func startServe(t *testing.T, env []string, addr, dataDir string, args ...string) *serveProc {
	t.Helper()
	p := startOnTerminal(t, env, "reins", append([]string{"serve", "--addr", addr, "--data-dir", dataDir, "--sandbox", "none"}, args...)...)
	p.waitFor(`reins is serving`, 60*time.Second)
	s := &serveProc{termProc: p, url: "http://" + addr, dataDir: dataDir}
	if b, err := os.ReadFile(filepath.Join(dataDir, "api-key")); err == nil {
		s.key = strings.TrimSpace(string(b))
	}
	return s
}

// stop ends the server with SIGTERM and waits.
func (s *serveProc) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait(30 * time.Second)
}

// kill ends the server at once, as a crash would.
func (s *serveProc) kill() {
	s.cmd.Process.Kill()
	s.wait(10 * time.Second)
}

// shell runs a bash script with env and returns its output.
func shell(t *testing.T, ctx context.Context, env []string, dir, script string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = env
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, out)
	}
	return string(out), nil
}
