package toolhost

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// outputsFixture is a store and a workspace with an outputs directory.
type outputsFixture struct {
	t   *testing.T
	ctx context.Context
	tmp string // holds the store, the spool and the workspace
	ws  string // the workspace
	st  store.Store
}

func newOutputsFixture(t *testing.T) *outputsFixture {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(tmp, "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ws := filepath.Join(tmp, "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "outputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &outputsFixture{t: t, ctx: ctx, tmp: tmp, ws: ws, st: st}
}

// write writes a file of the workspace.
func (f *outputsFixture) write(name, content string) {
	f.t.Helper()
	p := filepath.Join(f.ws, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// scanner is a new outputs scanner (a restarted server) of files up to
// maxSize bytes.
func (f *outputsFixture) scanner(maxSize int64) *outputs {
	return newOutputs(f.st, filepath.Join(f.tmp, "spool"), maxSize, slog.New(slog.DiscardHandler))
}

// kept returns the names and total size of the session's outputs.
func (f *outputsFixture) kept(sessionID string) ([]string, int64) {
	f.t.Helper()
	var out []string
	var size int64
	q := store.FileQuery{ListQuery: store.ListQuery{Limit: 1000}, ScopeID: sessionID}
	items, err := f.st.ListFiles(f.ctx, q)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, it := range items {
		out = append(out, it.Value.Filename)
		size += it.Value.SizeBytes
	}
	slices.Sort(out)
	return out, size
}

// TestOutputsKeptOnce: a scan keeps each regular file once per path and
// content, skips symbolic links and files over the size bound, and a new
// scanner (a restarted server) reads what the store holds instead of
// keeping the files again.
func TestOutputsKeptOnce(t *testing.T) {
	f := newOutputsFixture(t)
	f.write("outputs/a.txt", "alpha")
	f.write("outputs/big.bin", string(make([]byte, 2000)))
	for i := range 120 {
		f.write(fmt.Sprintf("outputs/many/%03d.txt", i), fmt.Sprint(i))
	}
	f.write("secret", "not an output")
	if err := os.Symlink(filepath.Join(f.ws, "secret"), filepath.Join(f.ws, "outputs", "link")); err != nil {
		t.Fatal(err)
	}
	o := f.scanner(1000)
	o.collect(f.ctx, "sesn_1", f.ws)
	got, _ := f.kept("sesn_1")
	if len(got) != 121 || got[0] != "a.txt" || slices.Contains(got, "link") || slices.Contains(got, "big.bin") {
		t.Fatalf("kept %d files: %v", len(got), got[:min(3, len(got))])
	}
	o.collect(f.ctx, "sesn_1", f.ws)
	f.scanner(1000).collect(f.ctx, "sesn_1", f.ws) // a restart
	if got, _ := f.kept("sesn_1"); len(got) != 121 {
		t.Fatalf("%d files after rescans, want 121", len(got))
	}
	f.write("outputs/a.txt", "alpha, second version")
	o.collect(f.ctx, "sesn_1", f.ws)
	if got, _ := f.kept("sesn_1"); len(got) != 122 || got[0] != "a.txt" || got[1] != "a.txt" {
		t.Fatalf("after a change: %d files, first %v", len(got), got[:2])
	}
}

// TestOutputsNotFollowed: an outputs directory the sandbox replaced with
// a symbolic link (to the server's /proc/self, to a directory of secrets,
// to another directory of the workspace) is not read at all, nor is a
// directory under it that is a link; FIFOs are skipped without blocking.
func TestOutputsNotFollowed(t *testing.T) {
	f := newOutputsFixture(t)
	f.write("secrets/master-key", "the server's secret")
	f.write("workspace-file", "not an output")
	o := f.scanner(1 << 20)
	for i, target := range []string{"/proc/self", filepath.Join(f.ws, "secrets"), "secrets", "."} {
		os.RemoveAll(filepath.Join(f.ws, "outputs"))
		if err := os.Symlink(target, filepath.Join(f.ws, "outputs")); err != nil {
			t.Fatal(err)
		}
		sess := fmt.Sprintf("sesn_%d", i)
		o.collect(f.ctx, sess, f.ws)
		if got, _ := f.kept(sess); len(got) != 0 {
			t.Errorf("outputs -> %s: kept %d files: %q", target, len(got), got[:min(5, len(got))])
		}
	}
	os.Remove(filepath.Join(f.ws, "outputs"))
	f.write("outputs/report.txt", "a real output")
	for name, target := range map[string]string{"proc": "/proc/self", "up": "..", "secrets": "../secrets"} {
		os.Symlink(target, filepath.Join(f.ws, "outputs", name))
	}
	if err := syscall.Mkfifo(filepath.Join(f.ws, "outputs", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.collect(f.ctx, "sesn_links", f.ws)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the scan blocked")
	}
	if got, _ := f.kept("sesn_links"); !slices.Equal(got, []string{"report.txt"}) {
		t.Errorf("kept %q, want report.txt only", got[:min(5, len(got))])
	}
}

// TestOutputsBounded: one session's outputs hold at most ten times
// --max-file-size together, one walk reads at most that much, and a tree
// deeper than maxOutputDepth is walked to that depth only.
func TestOutputsBounded(t *testing.T) {
	f := newOutputsFixture(t)
	const maxSize = 1000
	for i := range 30 {
		f.write(fmt.Sprintf("outputs/%02d.bin", i), strings.Repeat(fmt.Sprint(i%10), 900))
	}
	o := f.scanner(maxSize)
	o.collect(f.ctx, "sesn_1", f.ws)
	// Each new file is read twice (hashed, then stored): 1,800 bytes of
	// the walk's 10,000.
	if got, _ := f.kept("sesn_1"); len(got) != 5 {
		t.Errorf("the first walk kept %d files, want 5", len(got))
	}
	for range 10 {
		o.collect(f.ctx, "sesn_1", f.ws)
	}
	if got, size := f.kept("sesn_1"); len(got) != 11 || size > 10*maxSize {
		t.Errorf("kept %d files of %d bytes together, want 11 within %d", len(got), size, 10*maxSize)
	}

	deep := "outputs/deep"
	for range maxOutputDepth {
		deep += "/d"
	}
	f.write(deep+"/bottom.txt", "too deep")
	f.write("outputs/top.txt", "top")
	f.scanner(1<<20).collect(f.ctx, "sesn_2", f.ws)
	if got, _ := f.kept("sesn_2"); !slices.Contains(got, "top.txt") || slices.ContainsFunc(got, func(n string) bool { return strings.HasSuffix(n, "bottom.txt") }) {
		t.Errorf("kept %d files from a tree deeper than %d, want top.txt and not bottom.txt", len(got), maxOutputDepth)
	}
}
