package toolhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// markerSuffix ends the name of the file beside a cloud session's
// workspace directory (outside it, so its tools cannot touch it) that
// holds the marker of the workspace.
const markerSuffix = ".marker"

// WorkspaceResetNotice opens the first tool result of a cloud session
// whose latest workspace is not on the replica that now runs it. The
// workspace there is new (empty), or stale: left from an earlier time the
// session ran on that replica.
const WorkspaceResetNotice = "[reins] This session moved to another server, which does not have its latest workspace: the workspace was reset. Files written and programs installed by earlier tool calls may be missing or out of date, and processes they started are gone; this tool ran in the workspace this server has."

// RunTool implements tool.Runner. With replicas, the first result
// of a cloud session's placement says so when its workspace is not the one
// the session last used (see workspaceNotice).
func (t *Host) RunTool(ctx context.Context, sess *ma.Session, call tool.Call) tool.Result {
	notice := t.workspaceNotice(ctx, sess.ID)
	repoErrs, failed := t.syncResources(ctx, sess)
	if failed != nil {
		return *failed
	}
	var res tool.Result
	if ws, ok := t.cloudWorkspace(sess.ID); ok {
		res = t.withMemory(ctx, sess, ws, func() tool.Result { return t.runTool(ctx, sess, call) })
	} else {
		res = t.runTool(ctx, sess, call)
	}
	t.collectOutputs(ctx, sess.ID)
	if notice != "" {
		res.Content = append([]ma.ContentBlock{{Type: "text", Text: notice}}, res.Content...)
	}
	res.Errors = append(res.Errors, repoErrs...)
	return res
}

// collectOutputs keeps the files a cloud session wrote to its outputs
// directory as Files (self-hosted sessions' workspaces are on their
// executors' machines: their outputs are not kept).
func (t *Host) collectOutputs(ctx context.Context, sessionID string) {
	if t.outputs == nil {
		return
	}
	if ws, ok := t.cloudWorkspace(sessionID); ok {
		t.outputs.collect(ctx, sessionID, ws)
	}
}

// cloudWorkspace returns the workspace directory of a session placed on
// this host's in-process executor; ok is false for other sessions.
func (t *Host) cloudWorkspace(sessionID string) (dir string, ok bool) {
	t.mu.Lock()
	l := t.leases[sessionID]
	cloud := l != nil && t.locals[l.EnvironmentID] != nil
	t.mu.Unlock()
	if !cloud || !safeName(l.EnvironmentID) || !safeName(sessionID) {
		return "", false
	}
	return workspaceDir(t.workspace, l.EnvironmentID, sessionID), true
}

// workspaceNotice checks, at the first tool call of each placement of a
// cloud session on this replica, that the session's workspace is the one
// it last used, and returns the notice to give the model when it is not.
//
// A cloud session's workspace is a directory on the disk of the replica
// that runs it, unless the operator shares the workspace root between the
// replicas. Beside the directory lies a marker file, whose content is also
// recorded in the database for the session. The same marker in both means
// the workspace is the last one used (this replica's, or a shared root's);
// a missing or other marker means the session last ran elsewhere (or here,
// before it ran elsewhere): its workspace here is fresh or stale, so a new
// marker is written and the model is told. A session that never had a
// marker has lost nothing.
func (t *Host) workspaceNotice(ctx context.Context, sessionID string) string {
	if t.hands == nil {
		return "" // one process: the workspace never moves
	}
	t.mu.Lock()
	l := t.leases[sessionID]
	cloud := l != nil && t.locals[l.EnvironmentID] != nil
	t.mu.Unlock()
	if !cloud || !t.hands.firstCall(sessionID, l) || !safeName(l.EnvironmentID) || !safeName(sessionID) {
		return ""
	}
	path := filepath.Join(t.workspace, l.EnvironmentID, sessionID+markerSuffix)
	want, err := t.st.WorkspaceMarker(ctx, sessionID)
	if err != nil {
		t.log.Warn("read a session's workspace marker", "session", sessionID, "err", err)
		t.hands.forget(sessionID) // checked again at the next call
		return ""
	}
	have, err := os.ReadFile(path)
	if err == nil && want != "" && strings.TrimSpace(string(have)) == want {
		return ""
	}
	if err := t.newMarker(ctx, sessionID, path); err != nil {
		t.log.Warn("mark a session's workspace", "session", sessionID, "err", err)
	}
	if want == "" {
		return "" // the session's first workspace
	}
	t.log.Info("a cloud session's workspace was not found on this replica; the model is told it was reset", "session", sessionID)
	return WorkspaceResetNotice
}

// toWorkspace moves a cloud session about to be placed on this replica to
// the replica that holds its latest workspace, when that is another one
// and it is alive: a session that went idle, and was woken here by a
// message sent to this replica, keeps its files and processes instead of
// starting over in a fresh workspace. It returns an error wrapping
// store.ErrFenced when the session moved (its runner here leaves), and nil
// when it is to be placed here: its workspace is here (or in a workspace
// root this replica shares), it never had one, or its replica is gone
// (then the first tool result says the workspace was reset).
func (t *Host) toWorkspace(ctx context.Context, sess *ma.Session) error {
	if t.hands == nil || !safeName(sess.EnvironmentID) || !safeName(sess.ID) {
		return nil
	}
	want, err := t.st.WorkspaceMarker(ctx, sess.ID)
	if err != nil {
		t.log.Warn("read a session's workspace marker", "session", sess.ID, "err", err)
		return nil
	}
	holder := markerReplica(want)
	if holder == "" || holder == t.hands.replica {
		return nil
	}
	have, err := os.ReadFile(filepath.Join(t.workspace, sess.EnvironmentID, sess.ID+markerSuffix))
	if err == nil && strings.TrimSpace(string(have)) == want {
		return nil // a shared workspace root
	}
	live, err := t.st.ReplicasWithHands(ctx, liveKey)
	if err != nil || !slices.Contains(live, holder) {
		return nil
	}
	moved, err := t.hands.handOver(ctx, sess.ID, holder)
	if err != nil || !moved {
		return err
	}
	t.log.Debug("cloud session handed over to the replica of its workspace", "session", sess.ID, "to", holder)
	return fmt.Errorf("the session moved to replica %s, which holds its workspace: %w", holder, store.ErrFenced)
}

// markerReplica returns the replica that wrote a workspace marker
// ("replica/random"; "" for a marker of an older version, random only).
func markerReplica(marker string) string {
	i := strings.LastIndexByte(marker, '/')
	if i < 0 {
		return ""
	}
	return marker[:i]
}

// newMarker writes a new marker beside the session's workspace, then
// records it for the session. The marker names this replica, so that a
// session woken elsewhere can be moved back to its workspace.
func (t *Host) newMarker(ctx context.Context, sessionID, path string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	m := t.hands.replica + "/" + hex.EncodeToString(b[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(m+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := t.st.SetWorkspaceMarker(ctx, sessionID, m); err != nil {
		return fmt.Errorf("record the marker: %w", err)
	}
	return nil
}

// firstCall reports whether l is a placement of the session not seen
// before by firstCall (until forget).
func (r *replicaHands) firstCall(sessionID string, l *executorhub.Lease) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checked[sessionID] == l {
		return false
	}
	if r.checked == nil {
		r.checked = map[string]*executorhub.Lease{}
	}
	r.checked[sessionID] = l
	return true
}

// forget drops what firstCall remembers of the session.
func (r *replicaHands) forget(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.checked, sessionID)
}

// EndedElsewhere frees what this replica holds of a session that was
// archived or deleted through another replica (whose SessionEnded freed
// its own): its placement, its sandbox and, once deleted, its workspace.
func (t *Host) EndedElsewhere(ctx context.Context, sessionID string) {
	t.Release(sessionID)
	if t.sandboxes != nil {
		t.sandboxes.end(sessionID)
	}
	if !safeName(sessionID) {
		return
	}
	if _, err := t.st.GetSession(ctx, sessionID); !errors.Is(err, store.ErrNotFound) {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(t.workspace, "*", sessionID))
	for _, d := range dirs {
		t.removeWorkspace(filepath.Base(filepath.Dir(d)), sessionID)
	}
}
