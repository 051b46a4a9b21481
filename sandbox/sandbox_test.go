package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := NewManager(Config{StateDir: t.TempDir(), Limits: Limits{Processes: 64, Memory: 256 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// run runs a shell command in sb and returns its combined output and
// exit status.
func run(t *testing.T, sb *Sandbox, script string) (string, ExitStatus) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	p, err := sb.Spawn(ProcSpec{Argv: []string{"bash", "-c", script}, Stdin: devnull, Stdout: w, Stderr: w, Setsid: true})
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&out, r); r.Close(); close(done) }()
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%q did not end", script)
	}
	<-done
	return out.String(), p.Wait()
}

func TestSandboxBasics(t *testing.T) {
	m := newManager(t)
	ws := t.TempDir()
	sb, err := m.Start(context.Background(), Options{Name: "t1", Workspace: ws, Env: []string{"MY_VAR=hello"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	out, st := run(t, sb, `id; hostname; pwd; echo $MY_VAR; echo hi > f; ls /proc | grep -c '^[0-9]'; cat /etc/shadow; echo oom $(cat /proc/self/oom_score_adj); ls /; ls /dev`)
	if st.Code != 0 {
		t.Errorf("exit %v:\n%s", st, out)
	}
	if b, err := os.ReadFile(ws + "/f"); err != nil || string(b) != "hi\n" {
		t.Fatalf("workspace write: %q %v", b, err)
	}
	for _, want := range []string{"uid=1000(user) gid=1000(user)", "\nreins\n", "\n/workspace\n", "\nhello\n",
		"\n4\n", // init, bash, ls and grep: nothing else is in the sandbox's /proc
		"/etc/shadow: No such file",
		"\noom 1000\n", // the OOM killer's first choice
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	for _, dev := range []string{"null", "zero", "urandom", "tty", "pts", "shm"} {
		if !strings.Contains(out, "\n"+dev+"\n") {
			t.Errorf("/dev/%s is missing:\n%s", dev, out)
		}
	}
	if strings.Contains(out, "\nroot\n") || strings.Contains(out, "\nhome\n") {
		t.Errorf("the host's directories are visible:\n%s", out)
	}
}

func TestSpawnFailure(t *testing.T) {
	sb := start(t, newManager(t), Options{})
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	_, err := sb.Spawn(ProcSpec{Argv: []string{"no-such-program-here"}, Stdin: devnull, Stdout: devnull, Stderr: devnull})
	if err == nil || !strings.Contains(err.Error(), "no-such-program-here: command not found") {
		t.Fatalf("err = %v", err)
	}
	if out, st := run(t, sb, "exit 3"); st.Code != 3 {
		t.Fatalf("after a failed spawn: %v %s", st, out)
	}
	sb.mu.Lock()
	early := len(sb.early)
	sb.mu.Unlock()
	if early != 0 {
		t.Errorf("the failed launcher's exit is still remembered (%d)", early)
	}
}

func start(t *testing.T, m *Manager, o Options) *Sandbox {
	t.Helper()
	if o.Name == "" {
		o.Name = t.Name()
	}
	if o.Workspace == "" {
		o.Workspace = t.TempDir()
	}
	sb, err := m.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// TestCloseKillsEverything: a detached process dies with its sandbox,
// and a process of a closed sandbox reports SIGKILL.
func TestCloseKillsEverything(t *testing.T) {
	sb := start(t, newManager(t), Options{})
	tag := fmt.Sprintf("%d", 200000+time.Now().UnixNano()%700000)
	run(t, sb, "setsid sleep "+tag+" </dev/null >/dev/null 2>&1 &")
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	p, err := sb.Spawn(ProcSpec{Argv: []string{"sleep", "600"}, Stdin: devnull, Stdout: devnull, Stderr: devnull})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); hostProcesses("sleep "+tag) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d detached sleeps on the host, want 1", hostProcesses("sleep "+tag))
		}
	}
	sb.Close()
	if st := p.Wait(); st.Signal != syscall.SIGKILL {
		t.Errorf("a process of a closed sandbox ended with %v", st)
	}
	if n := hostProcesses("sleep " + tag); n != 0 {
		t.Errorf("a detached process survived its sandbox")
	}
	if _, err := sb.Spawn(ProcSpec{Argv: []string{"true"}, Stdin: devnull, Stdout: devnull, Stderr: devnull}); !errors.Is(err, ErrClosed) {
		t.Errorf("spawn in a closed sandbox: %v", err)
	}
}

func hostProcesses(args string) int {
	n := 0
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == args {
			n++
		}
	}
	return n
}

// TestManyShortProcesses: exits that reach the server before the
// process's start is reported are not lost.
func TestManyShortProcesses(t *testing.T) {
	sb := start(t, newManager(t), Options{})
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	for i := 0; i < 30; i++ {
		p, err := sb.Spawn(ProcSpec{Argv: []string{"true"}, Stdin: devnull, Stdout: devnull, Stderr: devnull})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("process %d never ended", i)
		}
	}
}

func TestSignalGroup(t *testing.T) {
	sb := start(t, newManager(t), Options{})
	r, w, _ := os.Pipe()
	defer r.Close()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	p, err := sb.Spawn(ProcSpec{Argv: []string{"bash", "-c", "sleep 600 & echo up; wait"}, Stdin: devnull, Stdout: w, Stderr: w, Setpgid: true})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(r).ReadString('\n')
	if err := p.Signal(syscall.SIGTERM, true); err != nil {
		t.Fatal(err)
	}
	if st := p.Wait(); st.Signal != syscall.SIGTERM {
		t.Errorf("exit %v, want SIGTERM", st)
	}
	if out, _ := run(t, sb, "ps -eo args | grep -c '^sleep 600'"); strings.TrimSpace(out) != "0" {
		t.Errorf("the group's other process survived: %q", out)
	}
}

func TestReadOnlyWorkspace(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644)
	sb := start(t, newManager(t), Options{Workspace: ws, ReadOnly: true})
	out, st := run(t, sb, "cat f; echo y > f")
	if st.Code == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("wrote to a read-only workspace: %v %s", st, out)
	}
}

// TestEgressListener: the sandbox's only way out is the listener handed
// to Options.Egress; everything else fails.
func TestEgressListener(t *testing.T) {
	served := make(chan struct{})
	egress := func(ln net.Listener) {
		defer close(served)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "from the server\n")
			c.Close()
		}
	}
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	sb := start(t, newManager(t), Options{Egress: egress})
	port := host.Addr().(*net.TCPAddr).Port
	out, _ := run(t, sb, fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128 && head -1 <&3; echo $HTTPS_PROXY
(exec 4<>/dev/tcp/127.0.0.1/%d) 2>/dev/null && echo HOST-REACHED; ip -o link 2>/dev/null | wc -l`, port))
	if !strings.Contains(out, "from the server\nhttp://127.0.0.1:3128\n") || strings.Contains(out, "HOST-REACHED") {
		t.Errorf("egress:\n%s", out)
	}
	sb.Close()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Error("the egress listener was not closed with the sandbox")
	}
}

// TestReapLeftovers: a new manager kills what a state file records, if
// it is still the same process.
func TestReapLeftovers(t *testing.T) {
	state := t.TempDir()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	rec, _ := json.Marshal(pidRecord{Pid: cmd.Process.Pid, Start: procStart(cmd.Process.Pid)})
	os.WriteFile(filepath.Join(state, "1.pid"), rec, 0o600)
	other := exec.Command("sleep", "600")
	other.Start()
	defer other.Process.Kill()
	rec, _ = json.Marshal(pidRecord{Pid: other.Process.Pid, Start: "1"}) // a reused pid
	os.WriteFile(filepath.Join(state, "2.pid"), rec, 0o600)
	m, err := NewManager(Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the leftover was not killed: %v", err)
	}
	if other.Process.Signal(syscall.Signal(0)) != nil {
		t.Error("a process whose start time differs was killed")
	}
	if left, _ := filepath.Glob(filepath.Join(state, "*.pid")); len(left) != 0 {
		t.Errorf("state files left: %v", left)
	}
}

// TestExtraCA: a CA given to the sandbox is in the system bundle and in
// the bundle the variables name, beside the host's roots.
func TestExtraCA(t *testing.T) {
	ca := "-----BEGIN CERTIFICATE-----\nREINS-TEST-CA\n-----END CERTIFICATE-----\n"
	sb := start(t, newManager(t), Options{ExtraCA: []byte(ca)})
	out, _ := run(t, sb, `grep -c REINS-TEST-CA /etc/ssl/certs/ca-certificates.crt "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS"; grep -c 'BEGIN CERTIFICATE' "$REQUESTS_CA_BUNDLE"; echo x > /etc/ssl/certs/ca-certificates.crt`)
	lines := strings.Split(out, "\n")
	for _, l := range lines[:3] {
		if !strings.HasSuffix(l, ":1") {
			t.Errorf("the CA is missing from a bundle: %q\n%s", l, out)
		}
	}
	if n, _ := strconv.Atoi(lines[3]); n < 10 {
		t.Errorf("the host's roots are missing from the bundle (%d certificates)", n)
	}
	if !strings.Contains(out, "Read-only file system") {
		t.Errorf("the bundle is writable:\n%s", out)
	}
}

// TestNoInheritedDescriptors: a process starts with its three descriptors
// only; nothing of init's (the control socket) or the server's leaks.
func TestNoInheritedDescriptors(t *testing.T) {
	// A descriptor the server holds without close-on-exec, as one
	// inherited from whatever started the server would be.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	sb := start(t, newManager(t), Options{})
	out, _ := run(t, sb, `ls /proc/self/fd | sort -n | tr "\n" " "`)
	if strings.TrimSpace(out) != "0 1 2 3" { // 3: ls reading /proc/self/fd
		t.Errorf("descriptors of a process in the sandbox: %q", out)
	}
}

// TestBinds: a bound host directory is visible read-only at its target,
// and only targets under BindRoot are accepted.
func TestBinds(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "bin"), 0o755)
	os.WriteFile(filepath.Join(src, "bin", "hello"), []byte("#!/bin/sh\necho hello from the bind\n"), 0o755)
	sb := start(t, newManager(t), Options{Binds: []Bind{{Source: src, Target: PackagesDir}}})
	out, _ := run(t, sb, "/opt/reins/packages/bin/hello; touch /opt/reins/packages/x && echo WROTE; touch /opt/y && echo WROTE-OPT; true")
	if !strings.Contains(out, "hello from the bind\n") {
		t.Errorf("the bind is not visible:\n%s", out)
	}
	if strings.Contains(out, "WROTE") || !strings.Contains(out, "Read-only file system") {
		t.Errorf("the bind is writable:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(src, "x")); err == nil {
		t.Error("a file was written into the bind's source")
	}
	for _, target := range []string{"/usr/lib/x", "/opt", "opt/x", "/opt/../etc", "/workspace/x"} {
		_, err := newManager(t).Start(context.Background(), Options{Name: "bad", Workspace: t.TempDir(), Binds: []Bind{{Source: src, Target: target}}})
		if err == nil || !strings.Contains(err.Error(), "bind target") {
			t.Errorf("target %q: err = %v", target, err)
		}
	}
}

// TestHostPathsHidden: the host paths of the workspace and of a bind are
// nowhere in what the sandbox's processes can read of its processes
// (command lines, environments) and mounts, but in the root field of
// those two mounts in mountinfo, which a bind mount cannot hide (see
// docs/decisions.md).
func TestHostPathsHidden(t *testing.T) {
	ws, src := t.TempDir(), t.TempDir()
	host := filepath.Dir(ws) // the parent of both
	sb := start(t, newManager(t), Options{Workspace: ws, Binds: []Bind{{Source: src, Target: PackagesDir}}})
	out, _ := run(t, sb, `for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ /proc/[0-9]*/mounts /proc/[0-9]*/mountinfo; do
  echo "== $f"; tr '\0' ' ' < $f; echo
done 2>&1`)
	for _, want := range []string{"== /proc/1/cmdline\nreins-sandbox-init", " /workspace rw,", " /opt/reins/packages ro,"} {
		if !strings.Contains(out, want) {
			t.Fatalf("want %q in:\n%s", want, out)
		}
	}
	file := ""
	for _, line := range strings.Split(out, "\n") {
		if f, ok := strings.CutPrefix(line, "== "); ok {
			file = f
			continue
		}
		if !strings.Contains(line, host) {
			continue
		}
		fields := strings.Fields(line)
		root := strings.HasSuffix(file, "/mountinfo") && len(fields) > 4 && (fields[3] == ws && fields[4] == WorkspaceDir || fields[3] == src && fields[4] == PackagesDir)
		if !root {
			t.Errorf("a host path is visible in %s: %s", file, line)
		}
	}
}

// TestChownTreeKeepsToTheTree: giving a workspace to the sandbox's user
// gives away the links in it, never what they point to.
func TestChownTreeKeepsToTheTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files away needs root")
	}
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(ws, "a", "b", "f"), []byte("x"), 0o644)
	os.Symlink(secret, filepath.Join(ws, "a", "file-link"))
	os.Symlink(outside, filepath.Join(ws, "dir-link"))
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := chownTree(root, 54321, 54321); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) uint32 {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid
	}
	for _, p := range []string{".", "a", "a/b", "a/b/f", "a/file-link", "dir-link"} {
		if got := owner(filepath.Join(ws, p)); got != 54321 {
			t.Errorf("%s is owned by %d", p, got)
		}
	}
	for _, p := range []string{outside, secret} {
		if got := owner(p); got != 0 {
			t.Errorf("%s, outside the tree, was given to %d", p, got)
		}
	}
}

// TestMemoryMounts: a memory mount shows its host directory at
// MemoryDir/Name, writable (the writes land in the host directory) or
// read-only by the file system; the rest of MemoryDir is scratch that
// stays in the sandbox; names that are not one segment are refused.
func TestMemoryMounts(t *testing.T) {
	m := newManager(t)
	rw, ro := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(rw, "notes.md"), []byte("old\n"), 0o644)
	os.WriteFile(filepath.Join(ro, "rules.md"), []byte("keep\n"), 0o644)
	sb := start(t, m, Options{Memory: []MemoryMount{{Source: rw, Name: "prefs"}, {Source: ro, Name: "team", ReadOnly: true}}})
	out, _ := run(t, sb, `cd /mnt/memory && ls; cat prefs/notes.md team/rules.md
echo new > prefs/notes.md && mkdir -p prefs/a && echo deep > prefs/a/b.md && echo RW-OK
echo x > team/rules.md && echo WROTE-RO; touch team/y && echo WROTE-RO2
echo s > scratch.txt && echo SCRATCH-OK; true`)
	for _, want := range []string{"prefs\nteam\n", "old\nkeep\n", "RW-OK", "SCRATCH-OK", "Read-only file system"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "WROTE-RO") {
		t.Errorf("a read-only mount took a write:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "a", "b.md")); string(b) != "deep\n" {
		t.Errorf("the write did not reach the host directory: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "rules.md")); string(b) != "keep\n" {
		t.Errorf("read-only source changed: %q", b)
	}
	for _, d := range []string{rw, ro} {
		if _, err := os.Stat(filepath.Join(d, "scratch.txt")); err == nil {
			t.Errorf("scratch reached %s", d)
		}
	}
	for _, name := range []string{"", ".", "..", "a/b"} {
		_, err := m.Start(context.Background(), Options{Name: "bad", Workspace: t.TempDir(), Memory: []MemoryMount{{Source: rw, Name: name}}})
		if err == nil || !strings.Contains(err.Error(), "one path segment") {
			t.Errorf("name %q: err = %v", name, err)
		}
	}
}

// TestMemoryMountFor: a store mounted at MemoryDir/<name> has its source
// beside the workspace; any other mount path is refused.
func TestMemoryMountFor(t *testing.T) {
	m, err := MemoryMountFor("/data/ws/sesn_1", "/mnt/memory/notes", true)
	if err != nil || m != (MemoryMount{Source: "/data/ws/sesn_1.memory/notes", Name: "notes", ReadOnly: true}) {
		t.Fatalf("%+v %v", m, err)
	}
	for _, p := range []string{"/mnt/memory", "/mnt/memory/", "/mnt/memory/a/b", "/mnt/memory/..", "/workspace/x", "/mnt/memory/./x", `/mnt/memory/a\b`} {
		if _, err := MemoryMountFor("/data/ws/s", p, false); err == nil {
			t.Errorf("%q was accepted", p)
		}
	}
}
