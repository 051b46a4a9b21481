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
// session's workspace and archive state; a taken hash is a conflict; once
// its session is deleted the token is not found, and a token of a session
// that never existed is not either.
func testSessionTokens(t *testing.T, s store.Store) {
	bg := context.Background()
	ctxA := store.WithWorkspace(bg, "wrkspc_a")
	ts := now()
	sess, err := s.CreateSession(ctxA, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: "env_x",
		Agent: ma.SessionAgent{ID: "agent_a", Version: 1}, CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC().Truncate(time.Microsecond)
	tok := store.SessionToken{Hash: "hash_1", SessionID: sess.ID, WorkID: "work_1", EnvironmentID: "env_x", CreatedAt: created}
	if err := s.CreateSessionToken(bg, tok); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSessionToken(bg, store.SessionToken{Hash: "hash_2", SessionID: sess.ID, WorkID: "work_1", EnvironmentID: "env_x", CreatedAt: created}); err != nil {
		t.Fatalf("a second token of the item (another hand-out): %v", err)
	}
	if err := s.CreateSessionToken(bg, tok); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("taken hash: %v, want ErrConflict", err)
	}
	// Looked up without a workspace: the authentication runs before one.
	got, err := s.SessionTokenByHash(bg, "hash_1")
	if err != nil || got.SessionID != sess.ID || got.WorkID != "work_1" || got.EnvironmentID != "env_x" ||
		got.WorkspaceID != "wrkspc_a" || got.SessionArchived || !got.CreatedAt.Equal(created) {
		t.Fatalf("SessionTokenByHash = %+v, %v", got, err)
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
	if err := s.CreateSessionToken(bg, store.SessionToken{Hash: "hash_3", SessionID: "sesn_gone", WorkID: "work_9", EnvironmentID: "env_x", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionTokenByHash(bg, "hash_3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("token of a session that does not exist: %v, want ErrNotFound", err)
	}
}
