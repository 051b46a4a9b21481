package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/reinsdev/reins/executor/memsync"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
	"github.com/reinsdev/reins/tools"
)

// memoryMounts returns the sandbox mounts of an assigned session's memory
// stores, whose workspace is the directory dir.
func memoryMounts(a Assignment, dir string) ([]sandbox.MemoryMount, error) {
	out := make([]sandbox.MemoryMount, len(a.Memory))
	for i, m := range a.Memory {
		var err error
		if out[i], err = sandbox.MemoryMountFor(dir, m.MountPath, m.Access == "read_only"); err != nil {
			return nil, fmt.Errorf("memory store %s: %w", m.MemoryStoreID, err)
		}
	}
	return out, nil
}

// memorySession is a session whose tool calls run between a pull and a
// push of its memory stores, over the server's memory endpoints.
type memorySession struct {
	*builtinSession
	set *memsync.Set
	st  memsync.Store
}

// withMemory wraps s so that its memory stores (mounted by the sandboxes
// at mounts) stay in sync with the server at serverURL.
func withMemory(s *builtinSession, a Assignment, mounts []sandbox.MemoryMount, serverURL string, client *http.Client, owner *tools.Owner) Session {
	var dirs []*memsync.Dir
	for i, m := range mounts {
		d := &memsync.Dir{StoreID: a.Memory[i].MemoryStoreID, Path: m.Source, Mount: a.Memory[i].MountPath, ReadOnly: m.ReadOnly,
			Actor: ma.Actor{Type: ma.ActorSession, SessionID: a.SessionID}}
		if owner != nil {
			d.Owner = &memsync.Owner{UID: owner.UID, GID: owner.GID}
		}
		dirs = append(dirs, d)
	}
	return &memorySession{builtinSession: s, set: memsync.NewSet(dirs), st: &memsync.HTTPStore{BaseURL: serverURL, Token: a.SessionsToken, Client: client}}
}

// CallTool runs the call between a pull and a push; what could not be
// synced makes the result an error that says so.
func (m *memorySession) CallTool(ctx context.Context, name string, input json.RawMessage) ToolResult {
	var res ToolResult
	notice, ran := m.set.Around(ctx, m.st, func() { res = m.builtinSession.CallTool(ctx, name, input) })
	if !ran {
		return ToolResult{IsError: true, Content: []ContentBlock{{Type: "text", Text: notice}}}
	}
	if notice != "" {
		res.Content = append(res.Content, ContentBlock{Type: "text", Text: notice})
		res.IsError = true
	}
	return res
}

// unmountedSession tells the model, at the session's first tool call,
// that its memory stores are not mounted (the tools run unsandboxed).
type unmountedSession struct {
	*builtinSession
	noted atomic.Bool
}

func (u *unmountedSession) CallTool(ctx context.Context, name string, input json.RawMessage) ToolResult {
	res := u.builtinSession.CallTool(ctx, name, input)
	if u.noted.CompareAndSwap(false, true) {
		res.Content = append(res.Content, ContentBlock{Type: "text", Text: memsync.Unmounted("this executor runs tools without sandboxes")})
	}
	return res
}
