package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// build builds cmd/reins into bin.
func build(ctx context.Context, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/reinsdev/reins/cmd/reins")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build ./cmd/reins: %v\n%s", err, out)
	}
	return nil
}

// child is a reins child process, its output going to a log file.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	// done is closed when the process has exited; err is then Wait's
	// result.
	done chan struct{}
	err  error
	// reported is set once its exit was reported as unexpected.
	reported atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// startChild starts bin with args and env (added to a clean environment),
// its stdout and stderr to logPath.
func startChild(name, logPath, bin string, env []string, args ...string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// A group of its own: Ctrl-C stops the soak, which stops the child
	// and reports; the child goes if the soak dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// cleanEnv is this process's environment without the variables that
// configure reins or its model providers: the children get only what the
// soak gives them.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "REINS_") || strings.HasPrefix(name, "ANTHROPIC_") || strings.HasPrefix(name, "OPENAI_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// pid is the child's process id, or 0 for no child.
func (c *child) pid() int {
	if c == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// exited returns a channel closed when the child has exited; nil (never
// ready) for no child.
func (c *child) exited() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.done
}

// unexpected says how the child ended when it was not asked to stop: its
// exit status and the last lines of its log.
func (c *child) unexpected() string {
	c.reported.Store(true)
	return fmt.Sprintf("%s (pid %d) exited by itself: %v; last lines of its log:\n%s", c.name, c.pid(), c.err, tail(c.log, 5))
}

// stop ends the child with SIGTERM, then SIGKILL after grace. It returns
// an error if the child did not exit cleanly within grace, or had exited
// before without that being reported.
func (c *child) stop(grace time.Duration) error {
	if c == nil {
		return nil
	}
	c.stopOnce.Do(func() {
		select {
		case <-c.done:
			if !c.reported.Load() {
				c.stopErr = errors.New(c.unexpected())
			}
			return
		default:
		}
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
			if c.err != nil {
				c.stopErr = fmt.Errorf("%s exited with %v on SIGTERM; last lines of its log:\n%s", c.name, c.err, tail(c.log, 20))
			}
		case <-time.After(grace):
			c.cmd.Process.Kill()
			<-c.done
			c.stopErr = fmt.Errorf("%s did not exit within %s of SIGTERM; killed", c.name, grace)
		}
	})
	return c.stopErr
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// server is the `reins serve` child.
type server struct {
	*child
	url, debugURL, key, dataDir string
}

// startServer starts `reins serve` with a fresh data dir in dir, on free
// loopback ports, with a random bootstrap API key, and waits until it
// answers /healthz.
func startServer(ctx context.Context, bin, dir string, extra []string, log *slog.Logger) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	debug, err := freeAddr()
	if err != nil {
		return nil, err
	}
	key := "sk-reins-soak-" + rand.Text()
	data := filepath.Join(dir, "data")
	// All clients share one key: the per-key rate limits, which bound one
	// organisation's traffic, would measure themselves instead of the
	// server.
	args := append([]string{"serve", "--addr", addr, "--debug-addr", debug, "--data-dir", data, "--log-level", "warn",
		"--creates-per-minute", "0", "--requests-per-minute", "0", "--streams-per-key", "0"}, extra...)
	c, err := startChild("reins serve", filepath.Join(dir, "serve.log"), bin, []string{"REINS_API_KEY=" + key}, args...)
	if err != nil {
		return nil, err
	}
	s := &server{child: c, url: "http://" + addr, debugURL: "http://" + debug, key: key, dataDir: data}
	log.Info("started reins serve", "pid", s.pid(), "url", s.url, "debug", s.debugURL)
	if err := s.waitHealthy(ctx, 60*time.Second); err != nil {
		s.stop(serverGrace)
		return nil, err
	}
	return s, nil
}

// waitHealthy polls /healthz until it answers 200.
func (s *server) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return errors.New(s.unexpected())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("reins serve did not answer /healthz within %s; its log:\n%s", timeout, tail(s.log, 20))
}

// serverGrace is how long the server is given for its graceful shutdown
// (its own --shutdown-grace is 10 s).
const serverGrace = 30 * time.Second

// goroutines reads the server's goroutine count from the first line of
// /debug/pprof/goroutine?debug=1 ("goroutine profile: total N").
func (s *server) goroutines() (int, error) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(s.debugURL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("goroutine profile starts with %q", line)
	}
	io.Copy(io.Discard, resp.Body)
	return strconv.Atoi(n)
}

// saveGoroutines writes the server's goroutine stacks, grouped
// (/debug/pprof/goroutine?debug=1), to path.
func (s *server) saveGoroutines(path string) error {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(s.debugURL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startExecutor starts `reins executor` for the self-hosted environment
// whose key is envKey, serving up to sessions sessions at once, and waits
// until it is connected.
func startExecutor(ctx context.Context, bin, dir, url, envKey string, sessions int) (*child, error) {
	c, err := startChild("reins executor", filepath.Join(dir, "executor.log"), bin, []string{"REINS_ENVIRONMENT_KEY=" + envKey},
		"executor", "--url", url, "--workspace", filepath.Join(dir, "workspace"), "--name", "soak", "--max-sessions", strconv.Itoa(sessions))
	if err != nil {
		return nil, err
	}
	if err := c.waitLog(ctx, "connected: serving", 30*time.Second); err != nil {
		c.stop(executorGrace)
		return nil, err
	}
	return c, nil
}

// waitLog waits until the child's log has a line containing want.
func (c *child) waitLog(ctx context.Context, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(c.log); err == nil && strings.Contains(string(b), want) {
			return nil
		}
		select {
		case <-c.done:
			return errors.New(c.unexpected())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not log %q within %s; its log:\n%s", c.name, want, timeout, tail(c.log, 20))
}

// freeAddr returns a loopback address that nothing listened on a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// dirSize is the size of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// usage is a process's resource use at one moment.
type usage struct {
	rss        uint64 // bytes
	threads    int
	fds        int
	goroutines int // -1: unknown
}

// readUsage reads a process's RSS and threads from /proc/PID/status and
// counts its open files in /proc/PID/fd.
func readUsage(pid int) (usage, error) {
	u := usage{goroutines: -1}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for line := range strings.Lines(string(b)) {
		name, value, _ := strings.Cut(line, ":")
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		switch name {
		case "VmRSS": // "  123456 kB"
			kb, _ := strconv.ParseUint(fields[0], 10, 64)
			u.rss = kb << 10
		case "Threads":
			u.threads, _ = strconv.Atoi(fields[0])
		}
	}
	d, err := os.Open(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	u.fds = len(names)
	return u, err
}
