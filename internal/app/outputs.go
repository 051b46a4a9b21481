package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/sandbox"
	"github.com/reinsdev/reins/internal/store"
)

// Bounds of a session's outputs.
const (
	// maxOutputFiles is how many files of one session become Files.
	maxOutputFiles = 1000
	// maxOutputEntries bounds the entries of an outputs directory one
	// scan looks at.
	maxOutputEntries = 10000
)

// outputs keeps the files cloud sessions write to their workspace's
// outputs directory as Files of the session's scope: after each tool
// call, a file that is new, or whose content changed, is stored once per
// path and content (SHA-256).
type outputs struct {
	st      store.Files
	spool   string // where a file's content waits for the store
	maxSize int64  // a larger file is left out
	log     *slog.Logger

	mu       sync.Mutex
	sessions map[string]*sessionOutputs
}

// sessionOutputs is what one session's scans know.
type sessionOutputs struct {
	mu     sync.Mutex // one scan at a time
	loaded bool       // kept holds the session's stored outputs
	kept   map[outputKey]bool
	seen   map[string]outputStat // by path: as last scanned
}

type outputKey struct{ path, sha256 string }

type outputStat struct {
	size    int64
	modTime time.Time
}

func newOutputs(st store.Files, spool string, maxSize int64, log *slog.Logger) *outputs {
	return &outputs{st: st, spool: spool, maxSize: maxSize, log: log, sessions: map[string]*sessionOutputs{}}
}

// forget drops what the scans of a session know (its placement ended).
func (o *outputs) forget(sessionID string) {
	o.mu.Lock()
	delete(o.sessions, sessionID)
	o.mu.Unlock()
}

// collect stores the new and changed files under dir, the outputs
// directory of the session's workspace on this host. Symbolic links and
// other non-regular files are skipped, and nothing outside dir is read.
func (o *outputs) collect(ctx context.Context, sessionID, dir string) {
	o.mu.Lock()
	so := o.sessions[sessionID]
	if so == nil {
		so = &sessionOutputs{kept: map[outputKey]bool{}, seen: map[string]outputStat{}}
		o.sessions[sessionID] = so
	}
	o.mu.Unlock()
	so.mu.Lock()
	defer so.mu.Unlock()
	root, err := os.OpenRoot(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			o.log.Warn("open a session's outputs directory", "session", sessionID, "err", err)
		}
		return
	}
	defer root.Close()
	if !so.loaded {
		if err := o.load(ctx, sessionID, so); err != nil {
			o.log.Warn("list a session's outputs", "session", sessionID, "err", err)
			return
		}
	}
	entries := 0
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		entries++
		switch {
		case err != nil || ctx.Err() != nil:
			return fs.SkipAll
		case entries > maxOutputEntries || len(so.kept) >= maxOutputFiles:
			o.log.Warn("a session's outputs directory is over its bounds; the rest is left out", "session", sessionID,
				"entries", maxOutputEntries, "files", maxOutputFiles)
			return fs.SkipAll
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		stat := outputStat{info.Size(), info.ModTime()}
		if so.seen[p] == stat {
			return nil
		}
		so.seen[p] = stat
		if stat.size > o.maxSize {
			o.log.Warn("an output file is larger than --max-file-size; it is left out", "session", sessionID, "path", p, "size", stat.size)
			return nil
		}
		if err := o.store(ctx, root, sessionID, p, so); err != nil {
			o.log.Warn("keep an output file", "session", sessionID, "path", p, "err", err)
			delete(so.seen, p) // tried again at the next scan
		}
		return nil
	})
}

// load reads which outputs of the session the store has already.
func (o *outputs) load(ctx context.Context, sessionID string, so *sessionOutputs) error {
	q := store.FileQuery{ListQuery: store.ListQuery{Limit: 100}, ScopeID: sessionID}
	for {
		page, err := o.st.ListFiles(ctx, q)
		if err != nil {
			return err
		}
		for _, it := range page {
			so.kept[outputKey{it.Value.Filename, it.Value.SHA256}] = true
		}
		if len(page) < q.Limit {
			so.loaded = true
			return nil
		}
		q.After = page[len(page)-1].Pos
	}
}

// store keeps the file at p unless a file of the same path and content
// is kept already.
func (o *outputs) store(ctx context.Context, root *os.Root, sessionID, p string, so *sessionOutputs) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return err // replaced since the walk: nil, skipped
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, o.maxSize+1)); err != nil {
		return err
	}
	name := filepath.ToSlash(p)
	if so.kept[outputKey{name, hex.EncodeToString(h.Sum(nil))}] {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	stored, err := httpapi.StoreOutput(ctx, o.st, o.spool, f, o.maxSize, sessionID, name)
	if err != nil {
		return err
	}
	so.kept[outputKey{name, stored.SHA256}] = true
	o.log.Debug("output file kept", "session", sessionID, "path", name, "file", stored.ID, "size", stored.SizeBytes)
	return nil
}

// outputsDir is the outputs directory of a cloud session's workspace on
// this host.
func outputsDir(workspace, envID, sessionID string) string {
	return filepath.Join(workspace, envID, sessionID, sandbox.OutputsDir)
}
