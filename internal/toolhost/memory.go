package toolhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/reinsdev/reins/internal/memsync"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
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
// directories in step (package memsync): a pull before each tool call,
// a push after it.
type memoryDirs struct {
	st    memsync.Store
	owner *memsync.Owner // nil: the files stay the server's user's

	mu       sync.Mutex // guards sessions
	sessions map[string]*sessionMemory
}

// sessionMemory is one session's memory directories.
type sessionMemory struct {
	mu    sync.Mutex // one sync at a time; guards noted
	dirs  []*memsync.Dir
	noted bool // told the model that the stores are not mounted
}

func newMemoryDirs(st memsync.Store, owner *memsync.Owner) *memoryDirs {
	return &memoryDirs{st: st, owner: owner, sessions: map[string]*sessionMemory{}}
}

// of returns the session's memory directories, nil when it has no store.
func (m *memoryDirs) of(sess *ma.Session, ws string) (*sessionMemory, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sm := m.sessions[sess.ID]; sm != nil {
		return sm, nil
	}
	mounts, err := memoryMounts(sess, ws)
	if err != nil || len(mounts) == 0 {
		return nil, err
	}
	sm := &sessionMemory{}
	for _, mm := range mounts {
		sm.dirs = append(sm.dirs, &memsync.Dir{StoreID: mm.res.MemoryStoreID, Path: mm.source, Mount: mm.res.MountPath,
			ReadOnly: mm.res.Access == "read_only", Owner: m.owner, Actor: ma.Actor{Type: ma.ActorSession, SessionID: sess.ID}})
	}
	m.sessions[sess.ID] = sm
	return sm, nil
}

// forget drops a session's directories' state (a deleted session).
func (m *memoryDirs) forget(sessionID string) {
	m.mu.Lock()
	delete(m.sessions, sessionID)
	m.mu.Unlock()
}

// pull brings the stores' changes into the directories. A store deleted
// since is no longer synced (its directory stays as it was), which
// problems say.
func (sm *sessionMemory) pull(ctx context.Context, st memsync.Store) (problems []string, err error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	live := sm.dirs[:0]
	for _, d := range sm.dirs {
		p, err := d.Pull(ctx, st)
		problems = append(problems, p...)
		if errors.Is(err, store.ErrNotFound) {
			problems = append(problems, fmt.Sprintf("the memory store mounted at %s was deleted: what is written there is no longer saved.", d.Mount))
			continue
		}
		if err != nil {
			return problems, err
		}
		live = append(live, d)
	}
	sm.dirs = live
	return problems, nil
}

// push saves what the directories' files changed; problems are what
// could not be saved.
func (sm *sessionMemory) push(ctx context.Context, st memsync.Store) ([]string, error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var problems []string
	for _, d := range sm.dirs {
		p, err := d.Push(ctx, st)
		problems = append(problems, p...)
		if err != nil {
			return problems, err
		}
	}
	return problems, nil
}

// withMemory runs a cloud session's tool call between a pull and a push
// of its memory stores: the call sees what other sessions wrote, and
// what it wrote becomes the session's versions. What could not be saved
// makes the result an error that says so, for the model to fix.
func (t *Host) withMemory(ctx context.Context, sess *ma.Session, ws string, run func() tool.Result) tool.Result {
	sm, err := t.memory.of(sess, ws)
	if err != nil {
		return *errorResult(err)
	}
	if sm == nil {
		return run()
	}
	if t.sandboxes == nil {
		return sm.unmounted(run())
	}
	gone, err := sm.pull(ctx, t.memory.st)
	if err != nil {
		return *errorResult(fmt.Errorf("the memory stores could not be brought up to date: %w", err))
	}
	res := run()
	problems, err := sm.push(ctx, t.memory.st)
	problems = append(gone, problems...)
	if err != nil {
		problems = append(problems, fmt.Sprintf("What this call wrote under %s could not all be saved to the memory stores (%v); it is tried again after the next call.", sandbox.MemoryDir, err))
	}
	return withProblems(res, problems)
}

// unmounted tells the model, at the session's first call, that its
// memory stores are not mounted.
func (sm *sessionMemory) unmounted(res tool.Result) tool.Result {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if !sm.noted {
		sm.noted = true
		res.Content = append(res.Content, ma.ContentBlock{Type: "text", Text: "[reins] The session's memory stores are not mounted under " +
			sandbox.MemoryDir + ": this server runs tools without sandboxes (--sandbox=none)."})
	}
	return res
}

// withProblems adds the memory stores' problems to a tool result, which
// becomes an error.
func withProblems(res tool.Result, problems []string) tool.Result {
	if len(problems) == 0 {
		return res
	}
	text := "[reins] Memory store: " + strings.Join(problems, "\n[reins] Memory store: ")
	res.Content = append(res.Content, ma.ContentBlock{Type: "text", Text: text})
	res.IsError = true
	return res
}
