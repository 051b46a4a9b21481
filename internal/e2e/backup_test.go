package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/mcptest"
	"github.com/reinsdev/reins/internal/ops"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

// acks records the events the server acknowledged, by session.
type acks struct {
	mu   sync.Mutex // guards ids
	ids  map[string][]string
	n    atomic.Int64
	errs chan error
}

// sendLoop sends messages to the session until stop is closed, recording
// the ids of the acknowledged events.
func (a *acks) sendLoop(s *server, sessionID string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		res, err := s.client.Beta.Sessions.Events.Send(context.Background(), sessionID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(fmt.Sprintf("message %d", i))}})
		if err != nil {
			a.errs <- err
			return
		}
		var out struct{ Data []ma.Event }
		if err := json.Unmarshal([]byte(res.RawJSON()), &out); err != nil {
			a.errs <- err
			return
		}
		a.mu.Lock()
		for _, ev := range out.Data {
			a.ids[sessionID] = append(a.ids[sessionID], ev.ID)
		}
		a.mu.Unlock()
		a.n.Add(1)
	}
}

// snapshot copies what was acknowledged so far.
func (a *acks) snapshot() map[string][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]string{}
	for k, v := range a.ids {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// TestBackupUnderWriteLoad: reins backup copies a live SQLite store while
// sessions are being sent messages (commits land between the backup's
// steps), and a new server on the restored data dir serves every event
// acknowledged before the backup began.
func TestBackupUnderWriteLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startStoppable(t, options{dir: dir}, nil)
	agent := s.newAgent(t, "scripted")
	env := s.newEnv(t, "backup")
	a := &acks{ids: map[string][]string{}, errs: make(chan error, 8)}
	halt := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		sid := s.newSession(t, agent.ID, env.ID).ID
		wg.Go(func() { a.sendLoop(s, sid, halt) })
	}
	defer func() { close(halt); wg.Wait() }()
	waitAcks(t, a, 20)

	before := a.snapshot()
	var during int64
	first := true
	file := filepath.Join(t.TempDir(), "reins.backup")
	snap, err := ops.Backup(ctx, dir, file, "test", sqlite.BackupOptions{StepPages: 2, Progress: func(copied, total int) {
		if first { // let commits land while the backup is half done
			first = false
			from := a.n.Load()
			waitAcks(t, a, from+10)
			during = a.n.Load() - from
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if during < 10 || snap.Pages < 10 {
		t.Fatalf("%d messages acknowledged during a backup of %d pages", during, snap.Pages)
	}
	close(halt)
	wg.Wait()
	halt = make(chan struct{}) // for the deferred close
	select {
	case err := <-a.errs:
		t.Fatalf("a writer failed: %v", err)
	default:
	}
	stop()

	// The backup's key is needed: without it the restore says which.
	restored := t.TempDir()
	if _, err := ops.Restore(ctx, file, restored, "", false); err == nil || !strings.Contains(err.Error(), snap.VaultKeyID) {
		t.Fatalf("restore without the master key: %v", err)
	}
	key, err := os.ReadFile(filepath.Join(dir, vault.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, vault.KeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Restore(ctx, file, restored, "", false); err != nil {
		t.Fatal(err)
	}

	s2 := start(t, options{dir: restored})
	total := 0
	for sid, want := range before {
		have := map[string]bool{}
		iter := s2.client.Beta.Sessions.Events.ListAutoPaging(ctx, sid, anthropic.BetaSessionEventListParams{})
		for iter.Next() {
			have[iter.Current().ID] = true
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		for _, id := range want {
			if !have[id] {
				t.Fatalf("session %s: event %s, acknowledged before the backup, is not served after the restore", sid, id)
			}
		}
		total += len(want)
		// The restored session takes new messages.
		s2.send(t, sid, userMessage("after the restore"))
	}
	if total < 20 {
		t.Fatalf("only %d events checked", total)
	}
}

// waitAcks waits until n messages were acknowledged in all.
func waitAcks(t *testing.T, a *acks, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for a.n.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages acknowledged in 30 s, want %d", a.n.Load(), n)
		}
		select {
		case err := <-a.errs:
			t.Fatalf("a writer failed: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestMasterKeyRotationKeepsCredentials: a vault credential created
// before reins master-key rotate is used by an MCP tool call after it (the
// runtime opens it under the new key), the old key no longer opens it, and
// a server started with the old key is refused.
func TestMasterKeyRotationKeepsCredentials(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startStoppable(t, options{dir: dir}, nil)
	srv := mcptest.Start(t, mcptest.Options{Token: "rotated-s3cret"})
	sid := s.mcpSession(t, srv, "rotated-s3cret", "always_allow")
	stop()
	oldKey, _, err := vault.ReadKey("", dir)
	if err != nil {
		t.Fatal(err)
	}

	r, err := ops.RotateMasterKey(ctx, ops.Rotation{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.Resealed != 1 {
		t.Fatalf("rotation %+v, want one credential resealed", r)
	}
	if _, err := app.New(ctx, app.Config{DataDir: dir, MasterKey: oldKey}); err == nil || !strings.Contains(err.Error(), r.NewKeyID) {
		t.Fatalf("a server with the old key: %v", err)
	}

	s2 := start(t, options{dir: dir})
	st := s2.openStream(t, sid)
	s2.send(t, sid, userMessage(`@tool mcp__tools__echo {"text":"after rotation"}`+"\n@then done"))
	ok := false
	for _, f := range st.until(isIdle) {
		ok = ok || (f.Type == "agent.mcp_tool_result" && (f.IsError == nil || !*f.IsError) && strings.Contains(f.Content[0].Text, "after rotation"))
	}
	if !ok || !srv.SawToken("rotated-s3cret") {
		t.Fatal("the MCP tool did not run with the vault's token after the rotation")
	}

	old, _ := vault.NewKeyring(oldKey)
	vaults, err := s2.app.Store.ListVaults(ctx, store.ListQuery{Limit: 100})
	if err != nil || len(vaults) != 1 {
		t.Fatalf("vaults %v, %v", vaults, err)
	}
	creds, err := s2.app.Store.ListCredentials(ctx, vaults[0].Value.ID, store.ListQuery{Limit: 100})
	if err != nil || len(creds) != 1 {
		t.Fatalf("credentials %v, %v", creds, err)
	}
	if _, err := old.OpenSecrets(creds[0].Value.Sealed, creds[0].Value.ID); err == nil {
		t.Fatal("the old master key still opens the credential")
	}
}
