package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	t       *testing.T
	dir     string // the workspace
	outside string // a directory next to it
	w       *Workspace
	s       *Session
	logs    *bytes.Buffer
}

func newFixture(t *testing.T, opts WorkspaceOptions) *fixture {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	os.Mkdir(dir, 0o755)
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret\n"), 0o644)
	logs := &bytes.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	w, err := OpenWorkspace(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSession(w)
	t.Cleanup(func() { s.Close(); w.Close() })
	return &fixture{t: t, dir: w.Dir(), outside: outside, w: w, s: s, logs: logs}
}

func (f *fixture) call(name string, in any) Result {
	f.t.Helper()
	b, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.s.Call(ctx, name, b)
}

func (f *fixture) ok(name string, in any) string {
	f.t.Helper()
	r := f.call(name, in)
	if r.IsError {
		f.t.Fatalf("%s %v: %s (%s)", name, in, r.Text(), r.ErrorCode)
	}
	return r.Text()
}

func (f *fixture) fails(name string, in any, code string) Result {
	f.t.Helper()
	r := f.call(name, in)
	if !r.IsError || r.ErrorCode != code {
		f.t.Fatalf("%s %v = %q (error %v, code %q), want code %q", name, in, r.Text(), r.IsError, r.ErrorCode, code)
	}
	return r
}

type m = map[string]any

func TestReadWriteEdit(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	f.ok("write", m{"file_path": "dir/a.txt", "content": "one\ntwo\nthree\ntwo\n"})
	if got := f.ok("read", m{"file_path": "dir/a.txt", "view_range": []int{2, 3}}); got != "     2\ttwo\n     3\tthree\n" {
		t.Fatalf("read range = %q", got)
	}
	if got := f.ok("read", m{"file_path": f.dir + "/dir/a.txt", "view_range": []int{4, -1}}); got != "     4\ttwo\n" {
		t.Fatalf("read absolute path inside = %q", got)
	}
	f.fails("edit", m{"file_path": "dir/a.txt", "old_string": "two", "new_string": "2"}, CodeInvalidInput)
	f.fails("edit", m{"file_path": "dir/a.txt", "old_string": "four", "new_string": "4"}, CodeInvalidInput)
	f.ok("edit", m{"file_path": "dir/a.txt", "old_string": "three", "new_string": "3"})
	f.ok("edit", m{"file_path": "dir/a.txt", "old_string": "two", "new_string": "2", "replace_all": true})
	data, _ := os.ReadFile(filepath.Join(f.dir, "dir/a.txt"))
	if string(data) != "one\n2\n3\n2\n" {
		t.Fatalf("after edits: %q", data)
	}
	f.fails("read", m{"file_path": "missing.txt"}, CodeNotFound)
	f.fails("read", m{"file_path": "dir/a.txt", "extra": 1}, CodeInvalidInput)
}

func TestGlobGrep(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	f.ok("write", m{"file_path": "a/b/c.go", "content": "package c\nfunc Hello() {}\n"})
	f.ok("write", m{"file_path": "a/d.go", "content": "package a\n"})
	f.ok("write", m{"file_path": "e.txt", "content": "hello there\n"})
	if got := f.ok("glob", m{"pattern": "**/*.go"}); got != "a/b/c.go\na/d.go\n" {
		t.Fatalf("glob = %q", got)
	}
	if got := f.ok("glob", m{"pattern": "*.go", "path": "a"}); got != "a/d.go\n" {
		t.Fatalf("glob in path = %q", got)
	}
	if got := f.ok("grep", m{"pattern": "(?i)hello"}); got != "a/b/c.go:2:func Hello() {}\ne.txt:1:hello there\n" {
		t.Fatalf("grep = %q", got)
	}
	f.fails("glob", m{"pattern": "../*"}, CodeInvalidInput)
	f.fails("grep", m{"pattern": "x", "path": "../outside"}, CodeWorkspaceBoundary)
}

func TestWorkspaceEscapes(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	// A symlink planted inside, pointing out (as a file and as a directory).
	os.Symlink(filepath.Join(f.outside, "secret.txt"), filepath.Join(f.dir, "link.txt"))
	os.Symlink(f.outside, filepath.Join(f.dir, "linkdir"))
	cases := []struct {
		tool string
		in   m
	}{
		{"read", m{"file_path": "../outside/secret.txt"}},
		{"read", m{"file_path": filepath.Join(f.outside, "secret.txt")}},
		{"read", m{"file_path": "/etc/passwd"}},
		{"read", m{"file_path": "link.txt"}},
		{"read", m{"file_path": "linkdir/secret.txt"}},
		{"write", m{"file_path": "../outside/new.txt", "content": "x"}},
		{"write", m{"file_path": "linkdir/new.txt", "content": "x"}},
		{"write", m{"file_path": "link.txt", "content": "overwritten"}},
		{"edit", m{"file_path": "link.txt", "old_string": "top", "new_string": "pwned"}},
		{"edit", m{"file_path": "a/../../outside/secret.txt", "old_string": "top", "new_string": "pwned"}},
		{"glob", m{"pattern": "*", "path": "/"}},
		{"grep", m{"pattern": "secret", "path": "linkdir"}},
	}
	for _, c := range cases {
		f.fails(c.tool, c.in, CodeWorkspaceBoundary)
	}
	// Nothing outside changed or appeared.
	data, _ := os.ReadFile(filepath.Join(f.outside, "secret.txt"))
	if string(data) != "top secret\n" {
		t.Fatalf("secret.txt changed: %q", data)
	}
	if _, err := os.Stat(filepath.Join(f.outside, "new.txt")); err == nil {
		t.Fatal("new.txt was written outside")
	}
	// grep and glob do not follow the links either.
	if got := f.ok("grep", m{"pattern": "secret"}); got != "no matches" {
		t.Fatalf("grep followed a symlink: %q", got)
	}
}

func TestReadOnlyWorkspace(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{ReadOnly: true})
	os.WriteFile(filepath.Join(f.dir, "a.txt"), []byte("a\n"), 0o644)
	f.ok("read", m{"file_path": "a.txt"})
	f.fails("write", m{"file_path": "b.txt", "content": "x"}, CodeWorkspaceReadOnly)
	f.fails("edit", m{"file_path": "a.txt", "old_string": "a", "new_string": "b"}, CodeWorkspaceReadOnly)
	f.fails("bash", m{"command": "touch b.txt"}, CodeWorkspaceReadOnly)
}

func TestOutputTruncation(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{MaxOutputBytes: 1000})
	f.ok("write", m{"file_path": "big.txt", "content": strings.Repeat("0123456789\n", 500)})
	got := f.ok("read", m{"file_path": "big.txt"})
	if !strings.Contains(got, "[output truncated:") || len(got) > 1200 {
		t.Fatalf("read of a big file: %d bytes, marker %v", len(got), strings.Contains(got, "truncated"))
	}
	got = f.ok("bash", m{"command": "seq 1 5000; echo done"})
	if !strings.Contains(got, "[output truncated:") || !strings.HasSuffix(got, "done") || len(got) > 1300 {
		t.Fatalf("bash output: %d bytes: %q…", len(got), got[:min(len(got), 80)])
	}
}

func TestBashPersistentRestartTimeout(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	f.ok("bash", m{"command": "mkdir sub && cd sub && export X=42"})
	if got := f.ok("bash", m{"command": "pwd; echo $X"}); got != f.dir+"/sub\n42" {
		t.Fatalf("state did not persist: %q", got)
	}
	// exit ends the shell: reported as such, and the next call gets a new one.
	if r := f.call("bash", m{"command": "exit 3"}); !strings.Contains(r.Text(), "the shell exited") {
		t.Fatalf("exit: %+v", r)
	}
	f.ok("bash", m{"restart": true})
	if got := f.ok("bash", m{"command": "pwd; echo \"[$X]\""}); got != f.dir+"\n[]" {
		t.Fatalf("after restart: %q", got)
	}
	r := f.fails("bash", m{"command": "echo before; sleep 30", "timeout_ms": 200}, CodeTimeout)
	if !strings.Contains(r.Text(), "before") || !strings.Contains(r.Text(), "timed out") {
		t.Fatalf("timeout result: %q", r.Text())
	}
	if got := f.ok("bash", m{"command": "echo 'it''s' \"a\\\\b\" $'\\x41'"}); got != "its a\\b A" {
		t.Fatalf("quoting: %q", got)
	}
	if got := f.ok("bash", m{"command": "echo 'unterminated"}); !strings.Contains(got, "unexpected EOF") {
		t.Fatalf("syntax error: %q", got)
	}
	f.ok("bash", m{"command": "true"})
	// A program that escapes the process group does not hang the shell's end.
	f.ok("bash", m{"command": "setsid sleep 3 > /dev/null 2>&1 & setsid sleep 3 & echo started"})
	f.ok("bash", m{"restart": true})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	r = f.s.Call(ctx, "bash", json.RawMessage(`{"command":"sleep 30"}`))
	if r.ErrorCode != CodeCanceled {
		t.Fatalf("canceled bash: %+v", r)
	}
}

func TestBashConfinedByLandlock(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	target := filepath.Join(f.outside, "escaped.txt")
	got := f.call("bash", m{"command": "cd " + f.outside + " && echo pwned > escaped.txt; cd / && echo pwned > " + target + "; cat " + filepath.Join(f.outside, "secret.txt")})
	_, statErr := os.Stat(target)
	if f.w.Sandboxed() {
		if statErr == nil {
			t.Fatalf("bash wrote outside the workspace under Landlock: %q", got.Text())
		}
		if strings.Contains(got.Text(), "top secret") {
			t.Fatalf("bash read outside the workspace under Landlock: %q", got.Text())
		}
		// Inside the workspace it still works, and system tools run.
		if out := f.ok("bash", m{"command": "cd " + f.dir + " && echo ok > in.txt && cat in.txt && ls /usr/bin >/dev/null && echo sys && mktemp >/dev/null && echo tmp"}); out != "ok\nsys\ntmp" {
			t.Fatalf("inside the workspace: %q", out)
		}
		t.Logf("landlock in force: %q", got.Text())
	} else {
		// No Landlock: bash is not confined, and the workspace said so.
		if !strings.Contains(f.logs.String(), "landlock") {
			t.Fatalf("no Landlock and no log line: %q", f.logs.String())
		}
		t.Logf("landlock unsupported here; bash is unconfined (wrote: %v)", statErr == nil)
	}
}

func TestProcessesAndTerminals(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	exits := make(chan ProcessExit, 2)
	spec := ProcessSpec{Argv: []string{"sleep", "30"}}
	info, err := f.s.StartProcess("p1", spec, func(e ProcessExit) { exits <- e })
	if err != nil || info.PID == 0 {
		t.Fatalf("start: %v", err)
	}
	again, err := f.s.StartProcess("p1", spec, nil)
	if err != nil || again.PID != info.PID {
		t.Fatalf("idempotent start: %+v %v", again, err)
	}
	_, err = f.s.StartProcess("p1", ProcessSpec{Argv: []string{"sleep", "31"}}, nil)
	if te, ok := err.(*Error); !ok || te.Code != CodeSpecMismatch {
		t.Fatalf("spec mismatch: %v", err)
	}
	_, err = f.s.StartProcess("p2", ProcessSpec{Argv: []string{"/no/such/binary"}}, nil)
	if te, ok := err.(*Error); !ok || te.Code != CodeSpawnFailed {
		t.Fatalf("spawn failure: %v", err)
	}
	if _, err := f.s.SignalProcess("p1", "TERM"); err != nil {
		t.Fatal(err)
	}
	e := <-exits
	if e.State != ProcessKilled || e.ExitCode != 128+15 {
		t.Fatalf("exit: %+v", e)
	}

	out := make(chan []byte, 100)
	exited := make(chan int, 1)
	id, err := f.s.OpenTerminal("", []string{"cat"}, 80, 24, func(b []byte) { out <- b }, func(code int) { exited <- code })
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.WriteTerminal(id, []byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	for !bytes.Contains(seen, []byte("ping")) {
		select {
		case b := <-out:
			seen = append(seen, b...)
		case <-time.After(10 * time.Second):
			t.Fatalf("terminal output: %q", seen)
		}
	}
	if err := f.s.ResizeTerminal(id, 100, 30); err != nil {
		t.Fatal(err)
	}
	f.s.CloseTerminal(id)
	<-exited
	err = f.s.WriteTerminal("nope", nil)
	if te, ok := err.(*Error); !ok || te.Code != TerminalNotFound {
		t.Fatalf("unknown terminal: %v", err)
	}
}
