package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// callPromptly makes the call and fails the test if it has not returned
// within a few seconds, instead of hanging. A call stuck opening one of the
// FIFOs is then released, so that the test can end.
func (f *fixture) callPromptly(name string, in any, fifos ...string) Result {
	f.t.Helper()
	return f.callWithin(5*time.Second, name, in, fifos...)
}

// callWithin is callPromptly with the time the call may take.
func (f *fixture) callWithin(d time.Duration, name string, in any, fifos ...string) Result {
	f.t.Helper()
	b, _ := json.Marshal(in)
	done := make(chan Result, 1)
	go func() { done <- f.s.Call(context.Background(), name, b) }()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
	}
	for _, p := range fifos {
		// Opening a FIFO for reading and writing never blocks on Linux,
		// and gives a blocked open the peer it waits for.
		if fd, err := unix.Open(p, unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	f.t.Fatalf("%s %v did not return within %v", name, in, d)
	return Result{}
}

// special is a file that is not a regular file, planted in a workspace.
type special struct {
	name string // its name in the workspace
	kind string // the words the error must contain
	code string // the error code of every tool on it
}

// plantSpecials creates a FIFO, a unix socket, a symbolic link to a FIFO, a
// symbolic link to /dev/zero and, as root, a /dev/zero device node in the
// workspace, as a sandboxed bash could. It returns them and the paths of
// the FIFOs.
func plantSpecials(t *testing.T, dir string) ([]special, []string) {
	t.Helper()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Symlink("fifo", filepath.Join(dir, "fifolink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zerolink")); err != nil {
		t.Fatal(err)
	}
	specials := []special{
		{"fifo", "named pipe (FIFO)", CodeInvalidInput},
		{"sock", "unix socket", CodeInvalidInput},
		{"fifolink", "named pipe (FIFO)", CodeInvalidInput},
		{"zerolink", "outside the workspace", CodeWorkspaceBoundary},
	}
	if os.Geteuid() != 0 {
		t.Log("not root: skipping the character device case (mknod needs CAP_MKNOD)")
		return specials, []string{fifo}
	}
	if err := unix.Mknod(filepath.Join(dir, "zero"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5))); err != nil {
		t.Fatalf("mknod as root: %v", err)
	}
	return append(specials, special{"zero", "character device", CodeInvalidInput}), []string{fifo}
}

// TestSpecialFiles checks that every file tool refuses FIFOs, sockets and
// devices at once, naming what it found, instead of blocking on them or
// reading them without end.
func TestSpecialFiles(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	specials, fifos := plantSpecials(t, f.dir)
	for _, sp := range specials {
		for _, c := range []struct {
			tool string
			in   m
		}{
			{"read", m{"file_path": sp.name}},
			{"write", m{"file_path": sp.name, "content": "x"}},
			{"edit", m{"file_path": sp.name, "old_string": "\x00", "new_string": "x"}},
			{"grep", m{"pattern": ".", "path": sp.name}},
			{"glob", m{"pattern": "*", "path": sp.name}},
		} {
			r := f.callPromptly(c.tool, c.in, fifos...)
			if !r.IsError || r.ErrorCode != sp.code || !strings.Contains(r.Text(), sp.kind) {
				t.Errorf("%s %s = %q (error %v, code %q), want code %q naming %q", c.tool, sp.name, r.Text(), r.IsError, r.ErrorCode, sp.code, sp.kind)
			}
			if strings.Contains(r.Text(), f.dir) {
				t.Errorf("%s %s leaks the host path: %q", c.tool, sp.name, r.Text())
			}
		}
	}
	// Searching the whole workspace skips them and still finds the rest.
	if err := os.WriteFile(filepath.Join(f.dir, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.callPromptly("grep", m{"pattern": "."}, fifos...); got.IsError || got.Text() != "a.txt:1:hello\n" {
		t.Errorf("grep over the workspace = %q", got.Text())
	}
	if got := f.callPromptly("glob", m{"pattern": "*"}, fifos...); got.IsError || !strings.Contains(got.Text(), "a.txt\n") {
		t.Errorf("glob over the workspace = %q", got.Text())
	}
	// Nothing was written into the FIFO.
	fd, err := unix.Open(fifos[0], unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if n, _ := unix.Read(fd, make([]byte, 1)); n > 0 {
		t.Error("a tool wrote into the FIFO")
	}
}

// TestReadLimit checks that read refuses a file over its limit, here a
// sparse one, without reading it.
func TestReadLimit(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	big, err := os.Create(filepath.Join(f.dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(maxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	for tool, in := range map[string]m{
		"read": {"file_path": "big"},
		"edit": {"file_path": "big", "old_string": "a", "new_string": "b"},
		"grep": {"pattern": "a", "path": "big"},
	} {
		r := f.callPromptly(tool, in)
		if tool == "grep" {
			if r.IsError || r.Text() != "no matches" {
				t.Errorf("grep of a file over the limit = %q", r.Text())
			}
			continue
		}
		if r.ErrorCode != CodeInvalidInput || !strings.Contains(r.Text(), "limit") {
			t.Errorf("%s of a file over the limit = %q (code %q)", tool, r.Text(), r.ErrorCode)
		}
	}
}

// TestGrepBudget checks that grep stops, and says so, once it has read
// maxGrepBytes, here in sparse files just under the limit of one file.
func TestGrepBudget(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{})
	for i := range maxGrepBytes/maxFileBytes + 1 {
		name := filepath.Join(f.dir, fmt.Sprintf("sparse%02d", i))
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, maxFileBytes); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.dir, "zz.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Reading 100 MiB takes seconds under -race on a loaded machine: the
	// bound is for a grep that never stops, not for its speed.
	got := f.callWithin(time.Minute, "grep", m{"pattern": "needle"})
	if got.IsError || strings.Contains(got.Text(), "zz.txt") || !strings.Contains(got.Text(), "at most") {
		t.Fatalf("grep past its budget = %q", got.Text())
	}
}

// endless is a reader that never ends, like a /proc file that reports size
// 0 and streams for ever.
type endless struct{}

func (endless) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestReadAtMost checks the bound of every read of a file: a file that
// grows after its fstat, or never ends, is cut at the limit.
func TestReadAtMost(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := readAtMost(endless{}, 0, 1<<20)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("endless read: %v, want an error over the limit", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("readAtMost read an endless file for 10s")
	}
	data, err := readAtMost(strings.NewReader("abc"), 3, 3)
	if err != nil || string(data) != "abc" {
		t.Fatalf("read of a file at the limit = %q, %v", data, err)
	}
}

// TestVisibleDir checks that a workspace shown to the sandbox at another
// path takes paths under it and never prints the host path.
func TestVisibleDir(t *testing.T) {
	f := newFixture(t, WorkspaceOptions{VisibleDir: "/workspace"})
	if got := f.w.VisibleDir(); got != "/workspace" {
		t.Fatalf("VisibleDir() = %q", got)
	}
	f.ok("write", m{"file_path": "/workspace/d/a.txt", "content": "one\n"})
	if got := f.ok("read", m{"file_path": "/workspace/d/a.txt"}); got != "     1\tone\n" {
		t.Fatalf("read under the visible dir = %q", got)
	}
	if got := f.ok("read", m{"file_path": f.dir + "/d/a.txt"}); got != "     1\tone\n" {
		t.Fatalf("read under the host dir = %q", got)
	}
	f.ok("edit", m{"file_path": "/workspace/d/a.txt", "old_string": "one", "new_string": "two"})
	if got := f.ok("grep", m{"pattern": "two", "path": "/workspace"}); got != "d/a.txt:1:two\n" {
		t.Fatalf("grep under the visible dir = %q", got)
	}
	if got := f.ok("glob", m{"pattern": "**/*.txt", "path": "/workspace/d"}); got != "d/a.txt\n" {
		t.Fatalf("glob under the visible dir = %q", got)
	}
	f.fails("read", m{"file_path": "/workspace/../etc/passwd"}, CodeWorkspaceBoundary)
	f.fails("read", m{"file_path": "/workspacex/a.txt"}, CodeWorkspaceBoundary)
	for _, c := range []struct {
		tool string
		in   m
	}{
		{"read", m{"file_path": "/workspace/missing"}},
		{"read", m{"file_path": "/workspace/d"}},
		{"write", m{"file_path": "/workspace/d", "content": "x"}},
		{"edit", m{"file_path": "/workspace/d/missing", "old_string": "a", "new_string": "b"}},
		{"grep", m{"pattern": "x", "path": "/workspace/missing"}},
		{"glob", m{"pattern": "*", "path": "/workspace/missing"}},
	} {
		if r := f.call(c.tool, c.in); !r.IsError || strings.Contains(r.Text(), f.dir) {
			t.Errorf("%s %v = %q (error %v): want an error without the host path", c.tool, c.in, r.Text(), r.IsError)
		}
	}
	if _, err := OpenWorkspace(f.dir, WorkspaceOptions{VisibleDir: "workspace"}); err == nil {
		t.Fatal("a relative VisibleDir was accepted")
	}
}

// TestOwner checks that what the file tools create belongs to the Owner,
// and that what exists keeps its owner.
func TestOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another user needs root (CAP_CHOWN)")
	}
	const uid, gid = 4242, 4343
	f := newFixture(t, WorkspaceOptions{Owner: &Owner{UID: uid, GID: gid}})
	if err := os.Mkdir(filepath.Join(f.dir, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "old/kept.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.ok("write", m{"file_path": "old/new/deeper/made.txt", "content": "a\n"})
	f.ok("write", m{"file_path": "old/kept.txt", "content": "b\n"})
	f.ok("edit", m{"file_path": "old/new/deeper/made.txt", "old_string": "a", "new_string": "c"})
	for p, want := range map[string][2]int{
		"old":                     {0, 0},
		"old/kept.txt":            {0, 0},
		"old/new":                 {uid, gid},
		"old/new/deeper":          {uid, gid},
		"old/new/deeper/made.txt": {uid, gid},
	} {
		fi, err := os.Lstat(filepath.Join(f.dir, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if got := [2]int{int(st.Uid), int(st.Gid)}; got != want {
			t.Errorf("%s is owned by %v, want %v", p, got, want)
		}
	}
}
