package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

func runFiles(t *testing.T, open func(t *testing.T) store.Store) {
	for _, tt := range []struct {
		name string
		fn   func(*testing.T, store.Files)
	}{
		{"RoundTrip", testFileRoundTrip},
		{"ListFilters", testFileList},
		{"SizeMismatch", testFileSizeMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tt.fn(t, s)
		})
	}
}

func newFile(content []byte, scope string) store.File {
	sum := sha256.Sum256(content)
	f := store.File{File: ma.File{ID: ids.New("file_"), Type: "file", Filename: "a.txt", MimeType: "text/plain",
		SizeBytes: int64(len(content)), CreatedAt: now(), Downloadable: true}, SHA256: hex.EncodeToString(sum[:])}
	if scope != "" {
		f.Scope = &ma.FileScope{ID: scope, Type: "session"}
	}
	return f
}

// readAll reads a file back piece by piece.
func readAll(t *testing.T, s store.Files, id string) []byte {
	t.Helper()
	var out []byte
	for n := 0; ; n++ {
		b, err := s.ReadFileChunk(context.Background(), id, n)
		if errors.Is(err, store.ErrNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > store.FileChunk {
			t.Fatalf("piece %d has %d bytes, more than FileChunk", n, len(b))
		}
		out = append(out, b...)
	}
}

func testFileRoundTrip(t *testing.T, s store.Files) {
	ctx := context.Background()
	// Two full pieces and a partial one.
	content := bytes.Repeat([]byte("0123456789abcdef"), (2*store.FileChunk+100)/16)
	f := newFile(content, "")
	if err := s.CreateFile(ctx, f, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetFile(ctx, f.ID)
	if err != nil || got.SHA256 != f.SHA256 || got.SizeBytes != f.SizeBytes || got.Filename != "a.txt" || got.Scope != nil {
		t.Fatalf("GetFile = %+v, %v", got, err)
	}
	if back := readAll(t, s, f.ID); !bytes.Equal(back, content) {
		t.Fatalf("content read back: %d bytes, want %d equal ones", len(back), len(content))
	}
	empty := newFile(nil, "")
	if err := s.CreateFile(ctx, empty, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	if back := readAll(t, s, empty.ID); len(back) != 0 {
		t.Fatalf("empty file read back %d bytes", len(back))
	}
	if err := s.CreateFile(ctx, f, bytes.NewReader(content)); !errors.Is(err, store.ErrConflict) && err == nil {
		t.Fatalf("same id twice: %v", err)
	}
	if err := s.DeleteFile(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetFile(ctx, f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetFile after delete: %v", err)
	}
	if _, err := s.ReadFileChunk(ctx, f.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("content after delete: %v", err)
	}
	if err := s.DeleteFile(ctx, f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func testFileList(t *testing.T, s store.Files) {
	ctx := context.Background()
	var all []string
	for i := range 5 {
		scope := ""
		if i%2 == 0 {
			scope = "sesn_a"
		}
		f := newFile([]byte(strings.Repeat("x", i)), scope)
		if err := s.CreateFile(ctx, f, strings.NewReader(strings.Repeat("x", i))); err != nil {
			t.Fatal(err)
		}
		all = append(all, f.ID)
		time.Sleep(time.Millisecond)
	}
	page1, err := s.ListFiles(ctx, store.FileQuery{ListQuery: store.ListQuery{Limit: 3, Desc: true}})
	if err != nil || len(page1) != 3 || page1[0].Value.ID != all[4] {
		t.Fatalf("first page: %d items, %v", len(page1), err)
	}
	page2, err := s.ListFiles(ctx, store.FileQuery{ListQuery: store.ListQuery{Limit: 3, Desc: true, After: page1[2].Pos}})
	if err != nil || len(page2) != 2 || page2[1].Value.ID != all[0] {
		t.Fatalf("second page: %d items, %v", len(page2), err)
	}
	scoped, err := s.ListFiles(ctx, store.FileQuery{ListQuery: store.ListQuery{Limit: 10}, ScopeID: "sesn_a"})
	if err != nil || len(scoped) != 3 {
		t.Fatalf("scope filter: %d items, %v", len(scoped), err)
	}
	byID, err := s.ListFiles(ctx, store.FileQuery{ListQuery: store.ListQuery{Limit: 10}, IDs: []string{all[1], all[3], "file_nope"}})
	if err != nil || len(byID) != 2 || byID[0].Value.ID != all[1] {
		t.Fatalf("ids filter: %d items, %v", len(byID), err)
	}
}

func testFileSizeMismatch(t *testing.T, s store.Files) {
	ctx := context.Background()
	f := newFile([]byte("hello"), "")
	if err := s.CreateFile(ctx, f, strings.NewReader("hello, world")); err == nil {
		t.Fatal("content longer than size_bytes was stored")
	}
	if _, err := s.GetFile(ctx, f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused file is there: %v", err)
	}
	if _, err := s.ReadFileChunk(ctx, f.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused file's content is there: %v", err)
	}
}
