package toolhost

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/reinsdev/reins/internal/memsync"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
)

// memorySuffix ends the name of the directory beside a cloud session's
// workspace that holds its memory stores' directories (outside the
// workspace: the sandbox sees each only at its mount path).
const memorySuffix = ".memory"

// memoryMount is one memory_store resource of a session: where the
// session sees it, where its directory lies on this host.
type memoryMount struct {
	res    ma.SessionResource
	name   string // the directory's name under /mnt/memory
	source string
}

// memoryMounts returns the memory stores of a cloud session whose
// workspace is the directory ws.
func memoryMounts(sess *ma.Session, ws string) ([]memoryMount, error) {
	res, err := sessions.Resources(sess)
	if err != nil {
		return nil, err
	}
	var out []memoryMount
	for _, r := range res {
		if r.Type != "memory_store" {
			continue
		}
		name := path.Base(r.MountPath)
		if !safeName(name) || path.Dir(r.MountPath) != sandbox.MemoryDir {
			return nil, fmt.Errorf("memory store %s: mount path %q is not a directory of %s", r.MemoryStoreID, r.MountPath, sandbox.MemoryDir)
		}
		out = append(out, memoryMount{res: r, name: name, source: filepath.Join(ws+memorySuffix, name)})
	}
	return out, nil
}

// sandboxMounts are the sandbox's mounts of the memory stores: the
// directories are made if missing (the first pull fills them).
func sandboxMounts(mounts []memoryMount) ([]sandbox.MemoryMount, error) {
	var out []sandbox.MemoryMount
	for _, m := range mounts {
		if err := os.MkdirAll(m.source, 0o755); err != nil {
			return nil, fmt.Errorf("memory store %s: %w", m.res.MemoryStoreID, err)
		}
		out = append(out, sandbox.MemoryMount{Source: m.source, Name: m.name, ReadOnly: m.res.Access == "read_only"})
	}
	return out, nil
}

// memoryDirs keeps each cloud session's memory stores and their
// directories in step (a memsync.Set per session).
type memoryDirs struct {
	st    memsync.Store
	owner *memsync.Owner // nil: the files stay the server's user's

	mu       sync.Mutex // guards sessions and noted
	sessions map[string]*memsync.Set
	noted    map[string]bool // sessions told that their stores are not mounted
}

func newMemoryDirs(st memsync.Store, owner *memsync.Owner) *memoryDirs {
	return &memoryDirs{st: st, owner: owner, sessions: map[string]*memsync.Set{}, noted: map[string]bool{}}
}

// of returns the session's memory directories, nil when it has no store.
func (m *memoryDirs) of(sess *ma.Session, ws string) (*memsync.Set, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if set := m.sessions[sess.ID]; set != nil {
		return set, nil
	}
	mounts, err := memoryMounts(sess, ws)
	if err != nil || len(mounts) == 0 {
		return nil, err
	}
	var dirs []*memsync.Dir
	for _, mm := range mounts {
		dirs = append(dirs, &memsync.Dir{StoreID: mm.res.MemoryStoreID, Path: mm.source, Mount: mm.res.MountPath,
			ReadOnly: mm.res.Access == "read_only", Owner: m.owner, Actor: ma.Actor{Type: ma.ActorSession, SessionID: sess.ID}})
	}
	set := memsync.NewSet(dirs)
	m.sessions[sess.ID] = set
	return set, nil
}

// firstUnmounted reports whether the session is yet to be told that its
// stores are not mounted (and records that it now is).
func (m *memoryDirs) firstUnmounted(sessionID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := !m.noted[sessionID]
	m.noted[sessionID] = true
	return first
}

// forget drops a session's directories' state (a deleted session).
func (m *memoryDirs) forget(sessionID string) {
	m.mu.Lock()
	delete(m.sessions, sessionID)
	delete(m.noted, sessionID)
	m.mu.Unlock()
}

// withMemory runs a cloud session's tool call between a pull and a push
// of its memory stores: the call sees what other sessions wrote, and
// what it wrote becomes the session's versions. What could not be saved
// makes the result an error that says so, for the model to fix.
func (t *Host) withMemory(ctx context.Context, sess *ma.Session, ws string, run func() tool.Result) tool.Result {
	set, err := t.memory.of(sess, ws)
	if err != nil {
		return *errorResult(err)
	}
	if set == nil {
		return run()
	}
	if t.sandboxes == nil {
		res := run()
		if t.memory.firstUnmounted(sess.ID) {
			res.Content = append(res.Content, ma.ContentBlock{Type: "text", Text: memsync.Unmounted("this server runs tools without sandboxes (--sandbox=none)")})
		}
		return res
	}
	var res tool.Result
	notice, ran := set.Around(ctx, t.memory.st, func() { res = run() })
	if !ran {
		return tool.ErrorResult(notice)
	}
	if notice != "" {
		res.Content = append(res.Content, ma.ContentBlock{Type: "text", Text: notice})
		res.IsError = true
	}
	return res
}
