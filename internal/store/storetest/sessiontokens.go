package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// testSessionTokens: a sessions token is found by its hash with its
// session's workspace and archive state, whether the environment key that
// polled it is revoked and whether its environment is archived; a taken
// hash is a conflict; once its session is deleted the token is not found,
// and a token of a session that never existed is not either.
func testSessionTokens(t *testing.T, s store.Store) {
	bg := context.Background()
	ctxA := store.WithWorkspace(bg, "wrkspc_a")
	ts := now()
	env := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: "pull", Config: ma.EnvironmentConfig{Type: ma.EnvSelfHosted},
		CreatedAt: ts, UpdatedAt: ts}
	if err := s.CreateEnvironment(ctxA, env); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ekey_1", "ekey_2"} {
		if err := s.CreateEnvironmentKey(bg, store.EnvironmentKey{ID: id, EnvironmentID: env.ID, Hash: "eh_" + id, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := s.CreateSession(ctxA, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: env.ID,
		Agent: ma.SessionAgent{ID: "agent_a", Version: 1}, CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC().Truncate(time.Microsecond)
	tok := store.SessionToken{Hash: "hash_1", SessionID: sess.ID, WorkID: "work_1", EnvironmentID: env.ID, EnvironmentKeyID: "ekey_1", CreatedAt: created}
	if err := s.CreateSessionToken(bg, tok); err != nil {
		t.Fatal(err)
	}
	for _, o := range []store.SessionToken{
		{Hash: "hash_2", SessionID: sess.ID, WorkID: "work_1", EnvironmentID: env.ID, EnvironmentKeyID: "ekey_2", CreatedAt: created},
		{Hash: "hash_api", SessionID: sess.ID, WorkID: "work_1", EnvironmentID: env.ID, CreatedAt: created},
	} {
		if err := s.CreateSessionToken(bg, o); err != nil {
			t.Fatalf("another token of the item (another hand-out): %v", err)
		}
	}
	if err := s.CreateSessionToken(bg, tok); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("taken hash: %v, want ErrConflict", err)
	}
	// Looked up without a workspace: the authentication runs before one.
	got, err := s.SessionTokenByHash(bg, "hash_1")
	if err != nil || got.SessionID != sess.ID || got.WorkID != "work_1" || got.EnvironmentID != env.ID || got.EnvironmentKeyID != "ekey_1" ||
		got.WorkspaceID != "wrkspc_a" || got.SessionArchived || got.KeyRevoked || got.EnvironmentArchived || !got.CreatedAt.Equal(created) {
		t.Fatalf("SessionTokenByHash = %+v, %v", got, err)
	}
	// The key that polled it revoked: that token alone.
	if _, err := s.RevokeEnvironmentKey(bg, env.ID, "ekey_1", time.Now()); err != nil {
		t.Fatal(err)
	}
	for h, revoked := range map[string]bool{"hash_1": true, "hash_2": false, "hash_api": false} {
		if got, err := s.SessionTokenByHash(bg, h); err != nil || got.KeyRevoked != revoked || got.EnvironmentArchived {
			t.Fatalf("%s after revoking ekey_1: %+v %v; want KeyRevoked %v", h, got, err, revoked)
		}
	}
	if _, err := s.UpdateEnvironment(ctxA, env.ID, func(cur *ma.Environment) error {
		at := now()
		cur.ArchivedAt = &at
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SessionTokenByHash(bg, "hash_api"); err != nil || !got.EnvironmentArchived {
		t.Fatalf("token of an archived environment = %+v, %v; want EnvironmentArchived", got, err)
	}
	if _, err := s.SessionTokenByHash(bg, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	if _, err := s.UpdateSession(ctxA, sess.ID, func(tx store.Tx) error {
		at := now()
		tx.Session().ArchivedAt = &at
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SessionTokenByHash(bg, "hash_2"); err != nil || !got.SessionArchived {
		t.Fatalf("token of an archived session = %+v, %v; want SessionArchived", got, err)
	}
	if err := s.DeleteSession(ctxA, sess.ID); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"hash_1", "hash_2"} {
		if _, err := s.SessionTokenByHash(bg, h); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("token of a deleted session: %v, want ErrNotFound", err)
		}
	}
	if err := s.CreateSessionToken(bg, store.SessionToken{Hash: "hash_3", SessionID: "sesn_gone", WorkID: "work_9", EnvironmentID: env.ID, CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionTokenByHash(bg, "hash_3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("token of a session that does not exist: %v, want ErrNotFound", err)
	}
}
