package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestWorkspacesMigration: a database made before workspaces (schema 21)
// with rows of every workspaced kind migrates them into the default
// workspace, its keys into active admins (archived where revoked), and
// environment names become unique per workspace.
func TestWorkspacesMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reins.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	seedEveryKind(t, s)
	s.Close()

	db := migratedDB(t, path)
	for _, q := range append(append(append(append(slices.Clone(unaddRunsPending), unaddDeployments...), unaddThreads...), unaddWorkspaces...),
		// environments as schema 21 had it: names unique everywhere.
		`CREATE TABLE environments_old (pos INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE,
			created_at INTEGER NOT NULL, archived INTEGER NOT NULL DEFAULT 0, body BLOB NOT NULL)`,
		`INSERT INTO environments_old SELECT pos, id, name, created_at, archived, body FROM environments`,
		`DROP TABLE environments`, `ALTER TABLE environments_old RENAME TO environments`,
		`DROP TABLE workspaces`, `DROP TABLE audit_log`,
		`DELETE FROM schema_migrations WHERE version >= 22`) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var cols int
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('api_keys')`).Scan(&cols); err != nil || cols != 6 {
		t.Fatalf("api_keys before the migration has %d columns (%v), want 6", cols, err)
	}

	if s, err = sqlite.Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if w, err := s.GetWorkspace(ctx, store.DefaultWorkspace); err != nil || w.Name != "Default" || w.CreatedAt.Before(time.Now().Add(-time.Hour)) {
		t.Fatalf("default workspace: %+v, %v", w, err)
	}
	def, other := store.WithWorkspace(ctx, store.DefaultWorkspace), store.WithWorkspace(ctx, "wrkspc_other")
	for _, c := range []struct {
		ctx   context.Context
		found bool
	}{{def, true}, {other, false}} {
		for kind, err := range readEveryKind(c.ctx, s) {
			if c.found && err != nil || !c.found && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s (found %v wanted): %v", kind, c.found, err)
			}
		}
	}
	keys, err := s.ListAPIKeys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys: %+v, %v", keys, err)
	}
	for _, k := range keys {
		want := store.KeyActive
		if k.RevokedAt != nil {
			want = store.KeyArchived
		}
		if k.Role != store.RoleAdmin || k.Status != want || k.WorkspaceID != "" || k.CreatedByKeyID != "" {
			t.Fatalf("key %+v after the migration", k)
		}
	}
	env := ma.Environment{ID: "env_2", Type: "environment", Name: "dev", Config: ma.EnvironmentConfig{Type: ma.EnvCloud}, CreatedAt: ma.Time(time.Now()), UpdatedAt: ma.Time(time.Now())}
	if err := s.CreateEnvironment(def, env); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second environment named dev in the default workspace: %v", err)
	}
	if err := s.CreateEnvironment(other, env); err != nil {
		t.Fatalf("environment named dev in another workspace: %v", err)
	}
	if items, err := s.ListEnvironments(def, store.ListQuery{}); err != nil || len(items) != 1 || items[0].Value.ID != "env_1" {
		t.Fatalf("default workspace's environments: %+v, %v", items, err)
	}
}

// seedEveryKind stores one object of every workspaced kind, and two API
// keys, one revoked, without a workspace in the context.
func seedEveryKind(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	ts := ma.Time(time.Now())
	zip := []byte("zip")
	for _, err := range []error{
		s.CreateAgent(ctx, ma.Agent{ID: "agent_1", Type: "agent", Name: "a", Version: 1, CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}}),
		s.CreateEnvironment(ctx, ma.Environment{ID: "env_1", Type: "environment", Name: "dev", Config: ma.EnvironmentConfig{Type: ma.EnvCloud}, CreatedAt: ts, UpdatedAt: ts}),
		func() error {
			_, err := s.CreateSession(ctx, ma.Session{ID: "sesn_1", Type: "session", Status: ma.StatusIdle, CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}}, nil)
			return err
		}(),
		s.CreateVault(ctx, ma.Vault{ID: "vlt_1", Type: "vault", Metadata: ma.Metadata{}, CreatedAt: ts, UpdatedAt: ts}),
		s.CreateCredential(ctx, store.Credential{Credential: ma.Credential{ID: "vcrd_1", Type: "vault_credential", VaultID: "vlt_1", Metadata: ma.Metadata{},
			Auth: ma.CredentialAuth{Type: ma.AuthStaticBearer, MCPServerURL: "https://mcp.example.com"}, CreatedAt: ts, UpdatedAt: ts}, Sealed: []byte{1}}),
		s.CreateFile(ctx, store.File{File: ma.File{ID: "file_1", Type: "file", Filename: "a.txt", SizeBytes: 3, CreatedAt: ts}}, bytes.NewReader(zip)),
		s.CreateSkill(ctx, store.Skill{Skill: ma.Skill{ID: "skill_1", Type: "skill", LatestVersionID: "1", CreatedAt: ts, UpdatedAt: ts}, Name: "pdf"},
			store.SkillVersion{SkillVersion: ma.SkillVersion{ID: "1", Type: "skill_version", SkillID: "skill_1", CreatedAt: ts}, SizeBytes: 3}, bytes.NewReader(zip)),
		s.CreateMachine(ctx, store.Machine{ID: "mach_1", Name: "m", EnvironmentIDs: []string{"env_1"}, Hash: "mh", CreatedAt: time.Now()}),
		s.CreateAPIKey(ctx, store.APIKey{ID: "key_1", Hash: "h1", CreatedAt: time.Now()}),
		s.CreateAPIKey(ctx, store.APIKey{ID: "key_2", Hash: "h2", CreatedAt: time.Now()}),
		s.RevokeAPIKey(ctx, "key_2", time.Now()),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readEveryKind reads the objects seedEveryKind stored, with ctx.
func readEveryKind(ctx context.Context, s store.Store) map[string]error {
	errs := map[string]error{}
	_, errs["agent"] = s.GetAgent(ctx, "agent_1", 0)
	_, errs["environment"] = s.GetEnvironment(ctx, "env_1")
	_, errs["session"] = s.GetSession(ctx, "sesn_1")
	_, errs["vault"] = s.GetVault(ctx, "vlt_1")
	_, errs["credential"] = s.GetCredential(ctx, "vlt_1", "vcrd_1")
	_, errs["file"] = s.GetFile(ctx, "file_1")
	_, errs["skill"] = s.GetSkill(ctx, "skill_1")
	_, errs["machine"] = s.GetMachine(ctx, "mach_1")
	return errs
}
