package toolhost

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
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/sandbox"
	"github.com/reinsdev/reins/sandbox/nofollow"
)

// Bounds of a session's outputs.
const (
	// maxOutputFiles is how many files of one session become Files.
	maxOutputFiles = 1000
	// maxOutputEntries bounds the entries of an outputs directory one
	// walk looks at.
	maxOutputEntries = 10000
	// maxOutputDepth bounds how deep below the outputs directory a walk
	// goes.
	maxOutputDepth = 64
	// outputBytesPerFileSize is, in --max-file-size units, both what one
	// session's outputs may hold together and what one walk may read
	// (hashing files whose size or time changed, then storing new ones):
	// a tree of large or sparse files that change at every call cannot
	// make the server read or keep without bound.
	outputBytesPerFileSize = 10
)

// outputs keeps the files cloud sessions write to their workspace's
// outputs directory as Files of the session's scope: after each tool
// call, a file that is new, or whose content changed, is stored once per
// path and content (SHA-256).
//
// The workspace is the sandbox's to change, and the server reads it with
// its own (root's) rights: the outputs directory, and every directory and
// file under it, is opened through package nofollow, which never follows
// a link the sandbox put there and opens regular files only (see
// docs/decisions.md, "The server never follows a path the sandbox can
// change").
type outputs struct {
	st      store.Files
	spool   string // where a file's content waits for the store
	maxSize int64  // a larger file is left out
	log     *slog.Logger

	mu       sync.Mutex // guards sessions
	sessions map[string]*sessionOutputs
}

// sessionOutputs is what one session's scans know.
type sessionOutputs struct {
	mu     sync.Mutex // held by the one scan at a time; guards the fields below
	loaded bool       // kept and bytes hold the session's stored outputs
	kept   map[outputKey]bool
	bytes  int64                 // the size of the kept files together
	seen   map[string]outputStat // by path: as the last scan found them
}

type outputKey struct{ path, sha256 string }

type outputStat struct {
	size    int64
	modTime time.Time
}

func newOutputs(st store.Files, spool string, maxSize int64, log *slog.Logger) *outputs {
	return &outputs{st: st, spool: spool, maxSize: maxSize, log: log, sessions: map[string]*sessionOutputs{}}
}

// budget is how many bytes one session's outputs may hold, and one walk
// may read.
func (o *outputs) budget() int64 { return outputBytesPerFileSize * o.maxSize }

// forget drops what the scans of a session know (its placement ended).
func (o *outputs) forget(sessionID string) {
	o.mu.Lock()
	delete(o.sessions, sessionID)
	o.mu.Unlock()
}

// session returns what the scans of a session know.
func (o *outputs) session(sessionID string) *sessionOutputs {
	o.mu.Lock()
	defer o.mu.Unlock()
	so := o.sessions[sessionID]
	if so == nil {
		so = &sessionOutputs{kept: map[outputKey]bool{}, seen: map[string]outputStat{}}
		o.sessions[sessionID] = so
	}
	return so
}

// collect stores the new and changed files of the outputs directory of
// workspace, the session's workspace directory on this host. An outputs
// that is not a directory (a symbolic link the sandbox put in its place)
// is not read at all; below it, symbolic links and other non-regular
// files are skipped.
func (o *outputs) collect(ctx context.Context, sessionID, workspace string) {
	so := o.session(sessionID)
	so.mu.Lock()
	defer so.mu.Unlock()
	dir, err := openOutputs(workspace)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		o.log.Warn("a session's outputs directory is not read", "session", sessionID, "err", err)
		return
	}
	defer dir.Close()
	if !so.loaded {
		if err := o.load(ctx, sessionID, so); err != nil {
			o.log.Warn("list a session's outputs", "session", sessionID, "err", err)
			return
		}
	}
	sc := &outputScan{o: o, so: so, ctx: ctx, sessionID: sessionID, budget: o.budget(), seen: map[string]outputStat{}}
	err = nofollow.Walk(dir, nofollow.Bounds{Entries: maxOutputEntries, Depth: maxOutputDepth}, sc.visit)
	if errors.Is(err, nofollow.ErrBounds) {
		o.log.Warn("a session's outputs directory is over its bounds; the rest is left out", "session", sessionID,
			"entries", maxOutputEntries, "depth", maxOutputDepth)
	}
	if sc.stopped || err != nil {
		// What the walk did not reach is as the last one found it.
		for p, st := range so.seen {
			if _, ok := sc.seen[p]; !ok && len(sc.seen) < maxOutputEntries {
				sc.seen[p] = st
			}
		}
	}
	so.seen = sc.seen
}

// openOutputs opens the outputs directory of workspace, refusing a
// symbolic link in its place.
func openOutputs(workspace string) (*os.Root, error) {
	ws, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return nofollow.OpenDir(ws, sandbox.OutputsDir)
}

// outputScan is one walk of a session's outputs directory.
type outputScan struct {
	o         *outputs
	so        *sessionOutputs
	ctx       context.Context
	sessionID string
	budget    int64                 // bytes the walk may still read
	seen      map[string]outputStat // the files this walk found
	stopped   bool                  // before the end of the directory
}

// visit keeps the file p (name in dir) if it is a regular file that is
// new or changed since the last walk.
func (sc *outputScan) visit(dir *os.Root, name, p string, d fs.DirEntry) error {
	o, so := sc.o, sc.so
	if sc.ctx.Err() != nil {
		sc.stopped = true
		return fs.SkipAll
	}
	if !d.Type().IsRegular() {
		return nil // directories are entered; nothing else is read
	}
	info, err := d.Info()
	if err != nil {
		return nil
	}
	stat := outputStat{info.Size(), info.ModTime()}
	switch prev, ok := so.seen[p]; {
	case ok && prev == stat:
		sc.seen[p] = stat
		return nil
	case stat.size > o.maxSize:
		o.log.Warn("an output file is larger than --max-file-size; it is left out", "session", sc.sessionID, "path", p, "size", stat.size)
		sc.seen[p] = stat
		return nil
	case len(so.kept) >= maxOutputFiles || so.bytes+stat.size > o.budget():
		o.log.Warn("a session's outputs are over their bounds; the rest is left out", "session", sc.sessionID,
			"files", maxOutputFiles, "bytes", o.budget())
		sc.stopped = true
		return fs.SkipAll
	case 2*stat.size > sc.budget:
		sc.stopped = true
		return fs.SkipAll // this walk has read its share: the next one goes on
	}
	if err := sc.store(dir, name, p, info); err != nil {
		o.log.Warn("keep an output file", "session", sc.sessionID, "path", p, "err", err)
		return nil // tried again at the next walk
	}
	sc.seen[p] = stat
	return nil
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
			so.bytes += it.Value.SizeBytes
		}
		if len(page) < q.Limit {
			so.loaded = true
			return nil
		}
		q.After = page[len(page)-1].Pos
	}
}

// store keeps the regular file name of dir (its path p, Lstat info)
// unless a file of the same path and content is kept already.
func (sc *outputScan) store(dir *os.Root, name, p string, info fs.FileInfo) error {
	o, so := sc.o, sc.so
	f, _, err := nofollow.OpenRegular(dir, name, info)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, o.maxSize+1))
	sc.budget -= n
	if err != nil {
		return err
	}
	if n > o.maxSize {
		return errors.New("it grew past --max-file-size")
	}
	if so.kept[outputKey{p, hex.EncodeToString(h.Sum(nil))}] {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	stored, err := httpapi.StoreOutput(sc.ctx, o.st, o.spool, f, o.maxSize, sc.sessionID, p)
	if err != nil {
		return err
	}
	sc.budget -= stored.SizeBytes
	so.kept[outputKey{p, stored.SHA256}] = true
	so.bytes += stored.SizeBytes
	o.log.Debug("output file kept", "session", sc.sessionID, "path", p, "file", stored.ID, "size", stored.SizeBytes)
	return nil
}

// workspaceDir is the workspace directory of a cloud session on this
// host.
func workspaceDir(workspace, envID, sessionID string) string {
	return filepath.Join(workspace, envID, sessionID)
}
