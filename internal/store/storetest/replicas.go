package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// testHandOver checks that a handed-over lease fences its old owner at
// once, goes to the new owner only, and is free for all once it expires
// unclaimed.
func testHandOver(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	ta, err := s.AcquireSession(ctx, sess.ID, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const short = 300 * time.Millisecond
	if err := s.HandOverSession(ctx, sess.ID, "a", ta-1, "b", short); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("hand over with a stale token: %v", err)
	}
	if err := s.HandOverSession(ctx, sess.ID, "a", ta, "b", short); err != nil {
		t.Fatal(err)
	}
	if err := appendMessage(store.WithFence(ctx, store.Fence{SessionID: sess.ID, Owner: "a", Token: ta}), s, sess.ID); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write of the owner that handed over: %v", err)
	}
	if err := s.RenewSession(ctx, sess.ID, "a", ta, time.Minute); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("renewal of the owner that handed over: %v", err)
	}
	if _, err := s.AcquireSession(ctx, sess.ID, "c", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("a third owner acquires a handed-over lease: %v", err)
	}
	tb, err := s.AcquireSession(ctx, sess.ID, "b", time.Minute)
	if err != nil || tb <= ta {
		t.Fatalf("the new owner acquires: token %d after %d, %v", tb, ta, err)
	}
	if err := appendMessage(store.WithFence(ctx, store.Fence{SessionID: sess.ID, Owner: "b", Token: tb}), s, sess.ID); err != nil {
		t.Fatalf("write of the new owner: %v", err)
	}
	// Handed over and never claimed: free for all once expired.
	if err := s.HandOverSession(ctx, sess.ID, "b", tb, "a", short); err != nil {
		t.Fatal(err)
	}
	time.Sleep(short + 100*time.Millisecond)
	if tc, err := s.AcquireSession(ctx, sess.ID, "c", time.Minute); err != nil || tc <= tb {
		t.Fatalf("acquire an unclaimed, expired hand-over: token %d after %d, %v", tc, tb, err)
	}
}

// testHands checks the announcements of executors: replaced per replica,
// withdrawn by an empty list, and ignored once expired.
func testHands(t *testing.T, s store.Store) {
	ctx := context.Background()
	check := func(env string, want ...string) {
		t.Helper()
		got, err := s.ReplicasWithHands(ctx, env)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("replicas with hands of %s = %v, %v; want %v", env, got, err, want)
		}
	}
	check("env_1")
	if err := s.AnnounceHands(ctx, "b", []string{"env_1", "env_2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.AnnounceHands(ctx, "a", []string{"env_1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("env_1", "a", "b")
	check("env_2", "b")
	if got, err := s.Announced(ctx, "b"); err != nil || !slices.Equal(got, []string{"env_1", "env_2"}) {
		t.Fatalf("announced by b = %v, %v", got, err)
	}
	if err := s.AnnounceHands(ctx, "b", []string{"env_2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("env_1", "a")
	if err := s.AnnounceHands(ctx, "a", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("env_1")
	const short = 300 * time.Millisecond
	if err := s.AnnounceHands(ctx, "c", []string{"env_3"}, short); err != nil {
		t.Fatal(err)
	}
	check("env_3", "c")
	time.Sleep(short + 100*time.Millisecond)
	check("env_3")
	if got, err := s.Announced(ctx, "c"); err != nil || len(got) != 0 {
		t.Fatalf("announced by c once expired = %v, %v", got, err)
	}
}

// testWorkspaceMarkers checks a session's workspace marker: none at
// first, replaced when set, deleted with the session.
func testWorkspaceMarkers(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	get := func() string {
		t.Helper()
		m, err := s.WorkspaceMarker(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := get(); m != "" {
		t.Fatalf("marker before any: %q", m)
	}
	for _, m := range []string{"one", "two"} {
		if err := s.SetWorkspaceMarker(ctx, sess.ID, m); err != nil {
			t.Fatal(err)
		}
		if got := get(); got != m {
			t.Fatalf("marker %q, want %q", got, m)
		}
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if m := get(); m != "" {
		t.Fatalf("marker of a deleted session: %q", m)
	}
}

// testRepositoryTokens checks a session's repository tokens: set,
// replaced, removed one by one, and deleted with the session.
func testRepositoryTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := newSession(t, s, "agent_a")
	get := func() map[string][]byte {
		t.Helper()
		m, err := s.RepositoryTokens(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := get(); len(m) != 0 {
		t.Fatalf("tokens before any: %v", m)
	}
	for _, set := range []struct{ rid, sealed string }{{"r1", "one"}, {"r2", "two"}, {"r1", "three"}} {
		if err := s.SetRepositoryToken(ctx, sess.ID, set.rid, []byte(set.sealed)); err != nil {
			t.Fatal(err)
		}
	}
	if m := get(); len(m) != 2 || string(m["r1"]) != "three" || string(m["r2"]) != "two" {
		t.Fatalf("tokens: %q", m)
	}
	if err := s.SetRepositoryToken(ctx, sess.ID, "r2", nil); err != nil {
		t.Fatal(err)
	}
	if m := get(); len(m) != 1 || string(m["r1"]) != "three" {
		t.Fatalf("tokens after removing r2: %q", m)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if m := get(); len(m) != 0 {
		t.Fatalf("tokens of a deleted session: %q", m)
	}
}

// testClaimSetting checks that the first claim of a setting wins and that
// a claim returns the recorded value.
func testClaimSetting(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, c := range []struct{ name, value, want string }{
		{"vault_key_id", "k1", "k1"},
		{"vault_key_id", "k2", "k1"},
		{"other", "x", "x"},
		{"vault_key_id", "k1", "k1"},
	} {
		if got, err := s.ClaimSetting(ctx, c.name, c.value); err != nil || got != c.want {
			t.Fatalf("ClaimSetting(%s, %s) = %q, %v; want %q", c.name, c.value, got, err, c.want)
		}
	}
}

// testRenewSessions renews many leases of one owner at once: each current
// one is extended, and those fenced off (a stale token, another owner's)
// are returned and left as they were.
func testRenewSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	const short = 300 * time.Millisecond
	var mine []store.Fence
	for range 3 {
		sess := newSession(t, s, "agent_a")
		token, err := s.AcquireSession(ctx, sess.ID, "a", short)
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, store.Fence{SessionID: sess.ID, Token: token})
	}
	stale := newSession(t, s, "agent_a")
	old, err := s.AcquireSession(ctx, stale.ID, "a", short)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSession(ctx, stale.ID, "a", short); err != nil { // a newer token
		t.Fatal(err)
	}
	theirs := newSession(t, s, "agent_a")
	if _, err := s.AcquireSession(ctx, theirs.ID, "b", short); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(mine), store.Fence{SessionID: stale.ID, Token: old}, store.Fence{SessionID: theirs.ID, Token: 1})
	fenced, err := s.RenewSessions(ctx, "a", all, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fenced)
	want := []string{stale.ID, theirs.ID}
	slices.Sort(want)
	if !slices.Equal(fenced, want) {
		t.Fatalf("fenced %v, want %v", fenced, want)
	}
	time.Sleep(short + 100*time.Millisecond)
	for _, f := range mine {
		if l, err := s.SessionLease(ctx, f.SessionID); err != nil || !l.Live || l.Owner != "a" || l.Token != f.Token {
			t.Fatalf("a renewed lease after its first ttl: %+v, %v", l, err)
		}
	}
	for _, id := range want {
		if l, err := s.SessionLease(ctx, id); err != nil || l.Live {
			t.Fatalf("a fenced lease was renewed: %+v, %v", l, err)
		}
	}
	if fenced, err := s.RenewSessions(ctx, "a", nil, time.Minute); err != nil || len(fenced) != 0 {
		t.Fatalf("renew no lease: %v, %v", fenced, err)
	}
}
