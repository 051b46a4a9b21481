// Package storetest is the conformance suite every store backend must pass:
// a backend's tests call Run with a function that opens a fresh, empty
// store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Run runs the whole suite. open must return a new empty store; Run closes
// it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"APIKeys", testAPIKeys},
		{"EnvironmentKeys", testEnvironmentKeys},
		{"Machines", testMachines},
		{"Work", testWork},
		{"OneOpenWork", testOneOpenWork},
		{"AgentVersions", testAgentVersions},
		{"AgentListPaging", testAgentListPaging},
		{"Environments", testEnvironments},
		{"SessionLog", testSessionLog},
		{"SessionRollback", testSessionRollback},
		{"TxReadLog", testTxReadLog},
		{"ConcurrentAppends", testConcurrentAppends},
		{"SessionListFilters", testSessionListFilters},
		{"StopReasons", testStopReasons},
		{"DeleteSession", testDeleteSession},
		{"EventFilters", testEventFilters},
		{"ListWhileConsumed", testListWhileConsumed},
		{"ByteBudget", testByteBudget},
		{"RunningTools", testRunningTools},
		{"Leases", testLeases},
		{"LeaseExpiry", testLeaseExpiry},
		{"FencedWrites", testFencedWrites},
		{"UnownedSessions", testUnownedSessions},
		{"ConcurrentAcquire", testConcurrentAcquire},
		{"HandOver", testHandOver},
		{"RenewSessions", testRenewSessions},
		{"Hands", testHands},
		{"ClaimSetting", testClaimSetting},
		{"WorkspaceMarkers", testWorkspaceMarkers},
		{"ToolCalls", testToolCalls},
		{"Idempotency", testIdempotency},
		{"IdempotentCreates", testIdempotentCreates},
		{"RepositoryTokens", testRepositoryTokens},
		{"SessionTokens", testSessionTokens},
		{"WorkspaceScoping", testWorkspaceScoping},
		{"Workspaces", testWorkspaces},
		{"KeyAdmin", testKeyAdmin},
		{"Audit", testAudit},
		{"ThreadViews", testThreadViews},
		{"Threads", testThreads},
		{"ThreadsLeft", testThreadsLeft},
		{"MemoryStores", testMemoryStores},
		{"Memories", testMemories},
		{"MemoryVersions", testMemoryVersions},
		{"MemoryRace", testMemoryRace},
		{"MemoryRetention", testMemoryRetention},
		{"Dreams", testDreams},
		{"DreamConflicts", testDreamConflicts},
		{"DreamClaims", testDreamClaims},
		{"Deployments", testDeployments},
		{"DeploymentRuns", testDeploymentRuns},
		{"PendingDeploymentRuns", testPendingDeploymentRuns},
		{"WebhookEndpoints", testWebhookEndpoints},
		{"WebhookOutbox", testWebhookOutbox},
		{"WebhookClaims", testWebhookClaims},
		{"DeploymentWebhooks", testDeploymentWebhooks},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tt.fn(t, s)
		})
	}
	t.Run("Vaults", func(t *testing.T) { RunVaults(t, open) })
	t.Run("Files", func(t *testing.T) { runFiles(t, open) })
	t.Run("Skills", func(t *testing.T) { runSkills(t, open) })
}

func now() string { return ma.Time(time.Now()) }

func testAPIKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	k := store.APIKey{ID: ids.New(ids.APIKey), Name: "ci", Hash: "h1", Hint: "abcd", CreatedAt: time.Now()}
	if err := s.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: ids.New(ids.APIKey), Hash: "h1", CreatedAt: time.Now()}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate hash: got %v, want ErrConflict", err)
	}
	got, err := s.APIKeyByHash(ctx, "h1")
	if err != nil || got.ID != k.ID || got.RevokedAt != nil {
		t.Fatalf("APIKeyByHash = %+v, %v", got, err)
	}
	if _, err := s.APIKeyByHash(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	if err := s.RevokeAPIKey(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAPIKey(ctx, "key_missing", time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	got, _ = s.APIKeyByHash(ctx, "h1")
	if got.RevokedAt == nil {
		t.Fatal("key not revoked")
	}
	list, err := s.ListAPIKeys(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListAPIKeys = %v, %v", list, err)
	}
}

func newAgent(name string) ma.Agent {
	ts := now()
	return ma.Agent{ID: ids.New(ids.Agent), Type: "agent", Name: name, Model: ma.ModelConfig{ID: "scripted"}, Version: 1, CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}}
}

func testAgentVersions(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newAgent("a")
	if err := s.CreateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	up, err := s.UpdateAgent(ctx, a.ID, func(cur ma.Agent) (ma.Agent, bool, error) {
		cur.System = "v2"
		cur.Version++
		return cur, true, nil
	})
	if err != nil || up.Version != 2 {
		t.Fatalf("update: %+v %v", up, err)
	}
	same, err := s.UpdateAgent(ctx, a.ID, func(cur ma.Agent) (ma.Agent, bool, error) { return cur, false, nil })
	if err != nil || same.Version != 2 {
		t.Fatalf("no-op update: %+v %v", same, err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateAgent(ctx, a.ID, func(cur ma.Agent) (ma.Agent, bool, error) { return cur, false, boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	v1, err := s.GetAgent(ctx, a.ID, 1)
	if err != nil || v1.System != "" {
		t.Fatalf("v1 = %+v %v", v1, err)
	}
	latest, _ := s.GetAgent(ctx, a.ID, 0)
	if latest.Version != 2 || latest.System != "v2" {
		t.Fatalf("latest = %+v", latest)
	}
	if _, err := s.GetAgent(ctx, a.ID, 9); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	vs, err := s.ListAgentVersions(ctx, a.ID, store.ListQuery{Desc: true, Limit: 10})
	if err != nil || len(vs) != 2 || vs[0].Value.Version != 2 {
		t.Fatalf("versions = %+v %v", vs, err)
	}
	if _, err := s.ListAgentVersions(ctx, "agent_nope", store.ListQuery{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("versions of unknown agent: %v", err)
	}
	// Archive hides it from the default list.
	if _, err := s.UpdateAgent(ctx, a.ID, func(cur ma.Agent) (ma.Agent, bool, error) {
		ts := now()
		cur.ArchivedAt = &ts
		return cur, true, nil
	}); err != nil {
		t.Fatal(err)
	}
	l, _ := s.ListAgents(ctx, store.ListQuery{Limit: 10})
	if len(l) != 0 {
		t.Fatalf("archived agent listed: %+v", l)
	}
	l, _ = s.ListAgents(ctx, store.ListQuery{Limit: 10, IncludeArchived: true})
	if len(l) != 1 {
		t.Fatalf("include_archived: %d", len(l))
	}
}

func testAgentListPaging(t *testing.T, s store.Store) {
	ctx := context.Background()
	var want []string
	for i := range 7 {
		a := newAgent(fmt.Sprint("agent", i))
		if err := s.CreateAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
		want = append(want, a.ID)
	}
	var got []string
	var after int64
	for {
		page, err := s.ListAgents(ctx, store.ListQuery{After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, it := range page {
			got = append(got, it.Value.ID)
		}
		after = page[len(page)-1].Pos
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	desc, _ := s.ListAgents(ctx, store.ListQuery{Desc: true, Limit: 2})
	if desc[0].Value.ID != want[6] || desc[1].Value.ID != want[5] {
		t.Fatal("desc order wrong")
	}
	back, _ := s.ListAgents(ctx, store.ListQuery{Before: desc[1].Pos, Desc: true, Limit: 5})
	if len(back) != 1 || back[0].Value.ID != want[6] {
		t.Fatalf("before page = %+v", back)
	}
}

func testEnvironments(t *testing.T, s store.Store) {
	ctx := context.Background()
	ts := now()
	e := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: "dev", Config: ma.EnvironmentConfig{Type: ma.EnvCloud}, CreatedAt: ts, UpdatedAt: ts}
	if err := s.CreateEnvironment(ctx, e); err != nil {
		t.Fatal(err)
	}
	dup := e
	dup.ID = ids.New(ids.Environment)
	if err := s.CreateEnvironment(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate name: %v", err)
	}
	e2 := dup
	e2.Name = "prod"
	if err := s.CreateEnvironment(ctx, e2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateEnvironment(ctx, e2.ID, func(cur *ma.Environment) error { cur.Name = "dev"; return nil }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("rename onto existing name: %v", err)
	}
	up, err := s.UpdateEnvironment(ctx, e.ID, func(cur *ma.Environment) error { cur.Description = "d"; return nil })
	if err != nil || up.Description != "d" {
		t.Fatal(err)
	}
	got, _ := s.GetEnvironment(ctx, e.ID)
	if got.Description != "d" {
		t.Fatal("update not stored")
	}
	if err := s.DeleteEnvironment(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEnvironment(ctx, e.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted env: %v", err)
	}
	if err := s.DeleteEnvironment(ctx, e.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("double delete: %v", err)
	}
}

func newSession(t *testing.T, s store.Store, agentID string) ma.Session {
	t.Helper()
	ts := now()
	sess := ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: "env_x",
		Agent: ma.SessionAgent{ID: agentID, Version: 1}, CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}}
	out, err := s.CreateSession(context.Background(), sess, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testSessionLog(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	msg := &ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}}
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.Append(msg) }); err != nil {
		t.Fatal(err)
	}
	if msg.ID == "" {
		t.Fatal("Append did not assign an id")
	}
	if ids, err := s.SessionIDsWithPending(ctx); err != nil || len(ids) != 1 || ids[0] != sess.ID {
		t.Fatalf("SessionIDsWithPending = %v, %v", ids, err)
	}
	// The runner consumes it: new echo with processed_at, status change.
	up, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
		p, err := tx.Pending()
		if err != nil {
			return err
		}
		if len(p) != 1 || p[0].ID != msg.ID {
			return fmt.Errorf("pending = %+v", p)
		}
		ts := now()
		p[0].ProcessedAt = &ts
		tx.Session().Status = ma.StatusRunning
		return tx.Append(&p[0], &ma.Event{Type: ma.EventStatusRunning, ProcessedAt: &ts})
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.Status != ma.StatusRunning {
		t.Fatalf("status %q", up.Status)
	}
	got, _ := s.GetSession(ctx, sess.ID)
	if got.Status != ma.StatusRunning {
		t.Fatal("status not stored")
	}
	log, err := s.ReadLog(ctx, sess.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 3 || log[0].Seq != 1 || log[1].Seq != 2 || log[2].Seq != 3 {
		t.Fatalf("log = %+v", log)
	}
	if log[0].Event.ProcessedAt != nil || log[1].Event.ProcessedAt == nil || log[1].Event.ID != msg.ID {
		t.Fatal("echoes wrong")
	}
	list, err := s.ListEvents(ctx, sess.ID, store.EventQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Event.ID != msg.ID || list[0].Seq != 2 {
		t.Fatalf("list = %+v", list)
	}
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
		p, _ := tx.Pending()
		if len(p) != 0 {
			return fmt.Errorf("still pending: %+v", p)
		}
		ev, err := tx.Event(msg.ID)
		if err != nil || ev.ProcessedAt == nil {
			return fmt.Errorf("tx.Event = %+v %v", ev, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if last, err := s.LastSeq(ctx, sess.ID); err != nil || last != 3 {
		t.Fatalf("LastSeq = %d, %v", last, err)
	}
	raw, err := s.ReadLogRaw(ctx, sess.ID, 0, 100, 0)
	if err != nil || len(raw) != 3 || raw[1].Event.ID != msg.ID || raw[1].Event.Type != ma.EventUserMessage || string(raw[1].Raw) != string(log[1].Raw) {
		t.Fatalf("ReadLogRaw = %+v, %v", raw, err)
	}
	part, _ := s.ReadLog(ctx, sess.ID, 2, 100)
	if len(part) != 1 || part[0].Seq != 3 {
		t.Fatalf("ReadLog after 2 = %+v", part)
	}
	if ids, _ := s.SessionIDsWithPending(ctx); len(ids) != 0 {
		t.Fatalf("still pending after consumption: %v", ids)
	}
	if _, err := s.UpdateSession(ctx, "sesn_missing", func(store.Tx) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

func testSessionRollback(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	boom := errors.New("boom")
	_, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
		tx.Session().Status = ma.StatusTerminated
		if err := tx.Append(&ma.Event{Type: ma.EventStatusTerminated}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	got, _ := s.GetSession(ctx, sess.ID)
	log, _ := s.ReadLog(ctx, sess.ID, 0, 10)
	if got.Status != ma.StatusIdle || len(log) != 0 {
		t.Fatalf("rolled-back write visible: %s %d", got.Status, len(log))
	}
	// The next append takes seq 1: nothing was skipped.
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.Append(&ma.Event{Type: ma.EventStatusRunning}) }); err != nil {
		t.Fatal(err)
	}
	log, _ = s.ReadLog(ctx, sess.ID, 0, 10)
	if len(log) != 1 || log[0].Seq != 1 {
		t.Fatalf("log after rollback = %+v", log)
	}
}

// testTxReadLog: a transaction reads the log after a seq, echoes and its
// own appends included.
func testTxReadLog(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	msg := &ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}}
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.Append(msg) }); err != nil {
		t.Fatal(err)
	}
	_, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
		ts := now()
		echo := *msg
		echo.ProcessedAt = &ts
		if err := tx.Append(&echo, &ma.Event{Type: ma.EventStatusRunning, ProcessedAt: &ts}); err != nil {
			return err
		}
		all, err := tx.ReadLog(0)
		if err != nil {
			return err
		}
		if len(all) != 3 || all[0].Seq != 1 || all[2].Seq != 3 || all[1].Event.ID != msg.ID || all[1].Event.ProcessedAt == nil || all[2].Event.Type != ma.EventStatusRunning {
			return fmt.Errorf("tx.ReadLog(0) = %+v", all)
		}
		tail, err := tx.ReadLog(2)
		if err != nil {
			return err
		}
		if len(tail) != 1 || tail[0].Seq != 3 || len(tail[0].Raw) == 0 {
			return fmt.Errorf("tx.ReadLog(2) = %+v", tail)
		}
		if none, err := tx.ReadLog(3); err != nil || len(none) != 0 {
			return fmt.Errorf("tx.ReadLog(3) = %+v, %v", none, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testConcurrentAppends(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
					return tx.Append(&ma.Event{Type: ma.EventAgentThinking})
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	log, err := s.ReadLog(ctx, sess.ID, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != workers*each {
		t.Fatalf("%d events, want %d", len(log), workers*each)
	}
	for i, e := range log {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq gap at %d: %d", i, e.Seq)
		}
	}
}

func testSessionListFilters(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newSession(t, s, "agent_a")
	b := newSession(t, s, "agent_b")
	c := newSession(t, s, "agent_a")
	if _, err := s.UpdateSession(ctx, c.ID, func(tx store.Tx) error { tx.Session().Status = ma.StatusRunning; return nil }); err != nil {
		t.Fatal(err)
	}
	l, _ := s.ListSessions(ctx, store.SessionQuery{AgentID: "agent_a", ListQuery: store.ListQuery{Limit: 10}})
	if len(l) != 2 || l[0].Value.ID != a.ID || l[1].Value.ID != c.ID {
		t.Fatalf("agent filter: %+v", l)
	}
	l, _ = s.ListSessions(ctx, store.SessionQuery{Statuses: []string{ma.StatusRunning}, ListQuery: store.ListQuery{Limit: 10}})
	if len(l) != 1 || l[0].Value.ID != c.ID {
		t.Fatalf("status filter: %+v", l)
	}
	l, _ = s.ListSessions(ctx, store.SessionQuery{ListQuery: store.ListQuery{Limit: 10, Desc: true}})
	if len(l) != 3 || l[0].Value.ID != c.ID || l[2].Value.ID != a.ID {
		t.Fatalf("desc: %+v", l)
	}
	_ = b
	l, _ = s.ListSessions(ctx, store.SessionQuery{EnvironmentID: "env_x", ListQuery: store.ListQuery{Limit: 10}})
	if len(l) != 3 {
		t.Fatalf("environment filter: %d sessions in env_x, want 3", len(l))
	}
	if l, _ = s.ListSessions(ctx, store.SessionQuery{EnvironmentID: "env_other", ListQuery: store.ListQuery{Limit: 10}}); len(l) != 0 {
		t.Fatalf("environment filter: %+v in env_other", l)
	}
	ids, err := s.SessionIDsByStatus(ctx, ma.StatusRunning, ma.StatusRescheduling)
	if err != nil || len(ids) != 1 || ids[0] != c.ID {
		t.Fatalf("SessionIDsByStatus = %v %v", ids, err)
	}
}

func testDeleteSession(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.Append(&ma.Event{Type: ma.EventAgentThinking}) }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSession(ctx, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := s.ListEvents(ctx, sess.ID, store.EventQuery{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("events of deleted: %v", err)
	}
	log, _ := s.ReadLog(ctx, sess.ID, 0, 10)
	if len(log) != 0 {
		t.Fatal("events survive delete")
	}
}

func testEventFilters(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		ts := ma.Time(base.Add(time.Duration(i) * time.Minute))
		typ := ma.EventAgentThinking
		if i%2 == 0 {
			typ = ma.EventAgentMessage
		}
		if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error { return tx.Append(&ma.Event{Type: typ, ProcessedAt: &ts}) }); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := s.ListEvents(ctx, sess.ID, store.EventQuery{Types: []string{ma.EventAgentMessage}, Limit: 10})
	if len(l) != 3 {
		t.Fatalf("types filter: %d", len(l))
	}
	gte := base.Add(2 * time.Minute)
	l, _ = s.ListEvents(ctx, sess.ID, store.EventQuery{GTE: &gte, Limit: 10})
	if len(l) != 3 || l[0].Seq != 3 {
		t.Fatalf("gte filter: %+v", l)
	}
	l, _ = s.ListEvents(ctx, sess.ID, store.EventQuery{Desc: true, Limit: 2})
	if len(l) != 2 || l[0].Seq != 5 {
		t.Fatalf("desc: %+v", l)
	}
	l, _ = s.ListEvents(ctx, sess.ID, store.EventQuery{After: 2, Limit: 2})
	if len(l) != 2 || l[0].Seq != 3 || l[1].Seq != 4 {
		t.Fatalf("after: %+v", l)
	}
}

func testEnvironmentKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	k := store.EnvironmentKey{ID: "ekey_1", EnvironmentID: "env_a", Hash: "eh1", Hint: "wxyz", CreatedAt: time.Now()}
	if err := s.CreateEnvironmentKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEnvironmentKey(ctx, store.EnvironmentKey{ID: "ekey_2", EnvironmentID: "env_b", Hash: "eh1", CreatedAt: time.Now()}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate hash: %v", err)
	}
	got, err := s.EnvironmentKeyByHash(ctx, "eh1")
	if err != nil || got.EnvironmentID != "env_a" || got.RevokedAt != nil {
		t.Fatalf("by hash: %+v %v", got, err)
	}
	if _, err := s.RevokeEnvironmentKey(ctx, "env_b", "ekey_1", time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke through another environment: %v", err)
	}
	rk, err := s.RevokeEnvironmentKey(ctx, "env_a", "ekey_1", time.Now())
	if err != nil || rk.RevokedAt == nil {
		t.Fatalf("revoke: %+v %v", rk, err)
	}
	list, err := s.ListEnvironmentKeys(ctx, "env_a")
	if err != nil || len(list) != 1 || list[0].RevokedAt == nil {
		t.Fatalf("list: %+v %v", list, err)
	}
	if l, _ := s.ListEnvironmentKeys(ctx, "env_b"); len(l) != 0 {
		t.Fatalf("keys of another environment listed: %+v", l)
	}
	if got.WorkspaceID != "" {
		t.Fatalf("the key of an environment that does not exist has workspace %q", got.WorkspaceID)
	}
	// A key names the workspace of its environment, whatever ctx's.
	ts := now()
	env := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: "in b", Config: ma.EnvironmentConfig{Type: ma.EnvSelfHosted}, CreatedAt: ts, UpdatedAt: ts}
	if err := s.CreateEnvironment(store.WithWorkspace(ctx, "wrkspc_b"), env); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEnvironmentKey(ctx, store.EnvironmentKey{ID: "ekey_3", EnvironmentID: env.ID, Hash: "eh3", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []context.Context{ctx, store.WithWorkspace(ctx, "wrkspc_a")} {
		if got, err := s.EnvironmentKeyByHash(c, "eh3"); err != nil || got.WorkspaceID != "wrkspc_b" || got.EnvironmentID != env.ID {
			t.Fatalf("by hash in %s: %+v %v", wsOf(c), got, err)
		}
	}
}

func testMachines(t *testing.T, s store.Store) {
	ctx := context.Background()
	m := store.Machine{ID: "mach_1", Name: "build-01", EnvironmentIDs: []string{"env_a", "env_b"}, Hash: "mh1", Hint: "wxyz", CreatedAt: time.Now()}
	if err := s.CreateMachine(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateMachine(ctx, store.Machine{ID: "mach_2", Name: "x", EnvironmentIDs: []string{"env_a"}, Hash: "mh1", CreatedAt: time.Now()}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate hash: %v", err)
	}
	got, err := s.MachineByHash(ctx, "mh1")
	if err != nil || got.ID != "mach_1" || got.Name != "build-01" || !slices.Equal(got.EnvironmentIDs, m.EnvironmentIDs) || got.Hint != "wxyz" || got.RevokedAt != nil {
		t.Fatalf("by hash: %+v %v", got, err)
	}
	if _, err := s.MachineByHash(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	if _, err := s.GetMachine(ctx, "mach_9"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := s.RevokeMachine(ctx, "mach_9", time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	first := time.Now().Add(-time.Minute)
	rm, err := s.RevokeMachine(ctx, "mach_1", first)
	if err != nil || rm.RevokedAt == nil || !rm.RevokedAt.Equal(first.UTC().Truncate(time.Nanosecond)) {
		t.Fatalf("revoke: %+v %v", rm, err)
	}
	if again, err := s.RevokeMachine(ctx, "mach_1", time.Now()); err != nil || !again.RevokedAt.Equal(*rm.RevokedAt) {
		t.Fatalf("revoke twice moved the time: %+v %v", again, err)
	}
	if err := s.CreateMachine(ctx, store.Machine{ID: "mach_3", Name: "later", EnvironmentIDs: []string{"env_c"}, Hash: "mh3", Hint: "abcd", CreatedAt: time.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListMachines(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "mach_1" || list[0].RevokedAt == nil || list[1].ID != "mach_3" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if g, err := s.GetMachine(ctx, "mach_3"); err != nil || g.EnvironmentIDs[0] != "env_c" {
		t.Fatalf("get: %+v %v", g, err)
	}
}
