package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// TestOutputsKeptOnce: a scan keeps each regular file once per path and
// content, skips symbolic links and files over the size bound, and a new
// scanner (a restarted server) reads what the store holds instead of
// keeping the files again.
func TestOutputsKeptOnce(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(tmp, "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := filepath.Join(tmp, "outputs")
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "alpha")
	write("big.bin", string(make([]byte, 2000)))
	for i := range 120 {
		write(fmt.Sprintf("many/%03d.txt", i), fmt.Sprint(i))
	}
	secret := filepath.Join(tmp, "secret")
	os.WriteFile(secret, []byte("not an output"), 0o600)
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		t.Helper()
		var out []string
		q := store.FileQuery{ListQuery: store.ListQuery{Limit: 1000}, ScopeID: "sesn_1"}
		items, err := st.ListFiles(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			out = append(out, it.Value.Filename)
		}
		slices.Sort(out)
		return out
	}
	newScanner := func() *outputs {
		return newOutputs(st, filepath.Join(tmp, "spool"), 1000, slog.New(slog.DiscardHandler))
	}

	o := newScanner()
	o.collect(ctx, "sesn_1", dir)
	got := names()
	if len(got) != 121 || got[0] != "a.txt" || slices.Contains(got, "link") || slices.Contains(got, "big.bin") {
		t.Fatalf("kept %d files: %v", len(got), got[:min(3, len(got))])
	}
	o.collect(ctx, "sesn_1", dir)
	newScanner().collect(ctx, "sesn_1", dir) // a restart
	if n := len(names()); n != 121 {
		t.Fatalf("%d files after rescans, want 121", n)
	}
	write("a.txt", "alpha, second version")
	o.collect(ctx, "sesn_1", dir)
	if got := names(); len(got) != 122 || got[0] != "a.txt" || got[1] != "a.txt" {
		t.Fatalf("after a change: %d files, first %v", len(got), got[:2])
	}
}
