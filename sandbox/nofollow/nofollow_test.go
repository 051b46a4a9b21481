package nofollow

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree makes files (content "x"), directories (a trailing slash),
// symbolic links ("name -> target") and FIFOs ("name|") under a new
// directory, and opens it as a root.
func tree(t *testing.T, entries ...string) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	for _, e := range entries {
		var err error
		switch name, target, link := strings.Cut(e, " -> "); {
		case link:
			err = os.Symlink(target, filepath.Join(dir, name))
		case strings.HasSuffix(e, "/"):
			err = os.MkdirAll(filepath.Join(dir, e), 0o755)
		case strings.HasSuffix(e, "|"):
			err = syscall.Mkfifo(filepath.Join(dir, strings.TrimSuffix(e, "|")), 0o644)
		default:
			err = os.WriteFile(filepath.Join(dir, e), []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return dir, root
}

// TestOpenDirRefusesLinks: a directory is opened only through
// directories; a symbolic link at any element is refused, whether it
// points outside the root or inside it, and so is a FIFO.
func TestOpenDirRefusesLinks(t *testing.T) {
	_, root := tree(t, "ok/deep/", "ok/deep/f", "inside/", "inside/secret",
		"proc -> /proc/self", "abs -> /", "rel -> inside", "up -> ..", "ok/rel -> ../inside", "fifo|", "file")
	for name, want := range map[string]error{
		"proc": ErrLink, "abs": ErrLink, "rel": ErrLink, "up": ErrLink, "ok/rel": ErrLink,
		"rel/secret": ErrLink, "fifo": ErrNotDir, "file": ErrNotDir, "missing": fs.ErrNotExist, "../ok": fs.ErrInvalid,
	} {
		d, err := OpenDir(root, name)
		if !errors.Is(err, want) {
			t.Errorf("OpenDir(%q) = %v, want %v", name, err, want)
		}
		if d != nil {
			d.Close()
		}
	}
	d, err := OpenDir(root, "ok/deep")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Stat("f"); err != nil {
		t.Errorf("ok/deep/f through the opened directory: %v", err)
	}
}

// TestOpenRegularRefusesWhatWasSwappedIn: a file replaced after it was
// looked at (by a FIFO, or a link to another file of the tree) is refused
// without blocking, and so are links and FIFOs looked at now.
func TestOpenRegularRefusesWhatWasSwappedIn(t *testing.T) {
	dir, root := tree(t, "a", "b", "other", "link -> other", "fifo|", "sub/")
	infoA, _ := root.Lstat("a")
	infoB, _ := root.Lstat("b")
	// The walk saw regular files a and b; then the sandbox swapped in a
	// FIFO and a link.
	os.Remove(filepath.Join(dir, "a"))
	if err := syscall.Mkfifo(filepath.Join(dir, "a"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "b"))
	os.Symlink("other", filepath.Join(dir, "b"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, c := range []struct {
			name string
			info fs.FileInfo
			want error
		}{
			{"a", infoA, ErrNotRegular}, {"b", infoB, ErrChanged}, {"link", nil, ErrLink},
			{"fifo", nil, ErrNotRegular}, {"sub", nil, ErrNotRegular}, {"a", nil, ErrNotRegular},
		} {
			f, _, err := OpenRegular(root, c.name, c.info)
			if !errors.Is(err, c.want) {
				t.Errorf("OpenRegular(%q) = %v, want %v", c.name, err, c.want)
			}
			if f != nil {
				f.Close()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("OpenRegular blocked on a FIFO")
	}
	f, fi, err := OpenRegular(root, "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, _ := io.ReadAll(f); string(b) != "x" || fi.Size() != 1 {
		t.Errorf("read %q, size %d", b, fi.Size())
	}
}

// walkPaths walks root and returns the paths it visited, sorted.
func walkPaths(t *testing.T, root *os.Root, b Bounds, fn WalkFunc) ([]string, error) {
	t.Helper()
	var got []string
	err := Walk(root, b, func(dir *os.Root, name, p string, d fs.DirEntry) error {
		got = append(got, p)
		if fn != nil {
			return fn(dir, name, p, d)
		}
		return nil
	})
	slices.Sort(got)
	return got, err
}

// TestWalkEntersDirectoriesOnly: links (to directories inside and
// outside the tree, to the tree itself) are visited as entries but never
// entered; a directory swapped for a link after it was listed is not
// entered either.
func TestWalkEntersDirectoriesOnly(t *testing.T) {
	dir, root := tree(t, "a/", "a/f", "a/b/", "a/b/g", "loop -> .", "etc -> /etc", "up -> ..", "swapped/", "swapped/h",
		"target/", "target/secret", "fifo|")
	got, err := walkPaths(t, root, Bounds{}, func(_ *os.Root, name, _ string, d fs.DirEntry) error {
		if name == "swapped" {
			// Listed as a directory; replaced by a link before it is entered.
			os.RemoveAll(filepath.Join(dir, "swapped"))
			os.Symlink("target", filepath.Join(dir, "swapped"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "a/b", "a/b/g", "a/f", "etc", "fifo", "loop", "swapped", "target", "target/secret", "up"}
	if !slices.Equal(got, want) {
		t.Errorf("visited %q\nwant    %q", got, want)
	}
}

// TestWalkBounds: a walk stops at its bounds on entries and depth and
// says so; fs.SkipDir and fs.SkipAll work as in fs.WalkDir.
func TestWalkBounds(t *testing.T) {
	_, root := tree(t, "1/2/3/4/5/", "1/2/3/4/5/f", "x", "y", "z")
	got, err := walkPaths(t, root, Bounds{Depth: 3}, nil)
	if !errors.Is(err, ErrBounds) || slices.Contains(got, "1/2/3/4") || !slices.Contains(got, "1/2/3") {
		t.Errorf("depth 3: %q, %v", got, err)
	}
	got, err = walkPaths(t, root, Bounds{Entries: 4}, nil)
	if !errors.Is(err, ErrBounds) || len(got) != 4 {
		t.Errorf("4 entries: %q, %v", got, err)
	}
	got, err = walkPaths(t, root, Bounds{}, nil)
	if err != nil || len(got) != 9 {
		t.Errorf("unbounded: %q, %v", got, err)
	}
	got, err = walkPaths(t, root, Bounds{Entries: 9, Depth: 6}, func(_ *os.Root, name, _ string, _ fs.DirEntry) error {
		if name == "2" {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil || len(got) != 5 || slices.Contains(got, "1/2/3") {
		t.Errorf("skip 1/2: %q, %v", got, err)
	}
	got, err = walkPaths(t, root, Bounds{}, func(*os.Root, string, string, fs.DirEntry) error { return fs.SkipAll })
	if err != nil || len(got) != 1 {
		t.Errorf("skip all: %q, %v", got, err)
	}
}
