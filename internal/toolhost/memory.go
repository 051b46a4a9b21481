package toolhost

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/executor/memsync"
	"github.com/reinsdev/reins/internal/executorhub"
	secrets "github.com/reinsdev/reins/internal/secret"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
)

// memoryMount is one memory_store resource of a session and its mount.
type memoryMount struct {
	res   ma.SessionResource
	mount sandbox.MemoryMount
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
		m, err := sandbox.MemoryMountFor(ws, r.MountPath, r.Access == "read_only")
		if err != nil {
			return nil, fmt.Errorf("memory store %s: %w", r.MemoryStoreID, err)
		}
		out = append(out, memoryMount{res: r, mount: m})
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
		dirs = append(dirs, &memsync.Dir{StoreID: mm.res.MemoryStoreID, Path: mm.mount.Source, Mount: mm.res.MountPath,
			ReadOnly: mm.mount.ReadOnly, Owner: m.owner, Actor: ma.Actor{Type: ma.ActorSession, SessionID: sess.ID}})
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

// memoryAssignment adds to the assignment of a session to a remote
// executor its memory stores and a new sessions token, with which the
// executor syncs them over the API (as the official worker does with the
// token of its work item).
func (t *Host) memoryAssignment(ctx context.Context, sess *ma.Session, req *executorhub.AssignRequest) error {
	res, err := sessions.Resources(sess)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Type == "memory_store" {
			req.Memory = append(req.Memory, executor.MemoryMount{MemoryStoreID: r.MemoryStoreID, MountPath: r.MountPath, Access: r.Access})
		}
	}
	if len(req.Memory) == 0 {
		return nil
	}
	token, hash := secrets.New(secrets.SessionsTokenPrefix)
	err = t.st.CreateSessionToken(ctx, store.SessionToken{Hash: hash, SessionID: sess.ID, EnvironmentID: sess.EnvironmentID, CreatedAt: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("issue the sessions token of session %s: %w", sess.ID, err)
	}
	req.SessionsToken = token
	return nil
}
