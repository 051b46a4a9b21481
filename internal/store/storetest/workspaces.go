package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// scoped is one kind of workspaced object, as the scoping test drives it:
// create makes one with ctx and returns its id; get reads it (every read
// of the kind that takes its id); list lists the ids; update and del
// change and remove it (nil when the kind has no such method).
type scoped struct {
	name   string
	create func(t *testing.T, s store.Store, ctx context.Context) string
	get    func(s store.Store, ctx context.Context, id string) error
	list   func(s store.Store, ctx context.Context) ([]string, error)
	update func(s store.Store, ctx context.Context, id string) error
	del    func(s store.Store, ctx context.Context, id string) error
}

// firstErr returns the first error of errs that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// idsOf returns a function that returns the ids of items by id, and err.
func idsOf[T any](items []store.Item[T], err error) func(id func(T) string) ([]string, error) {
	return func(id func(T) string) ([]string, error) {
		var out []string
		for _, it := range items {
			out = append(out, id(it.Value))
		}
		return out, err
	}
}

// wsOf names ctx's workspace in messages.
func wsOf(ctx context.Context) string {
	if ws, ok := store.WorkspaceFrom(ctx); ok {
		return ws
	}
	return "(no workspace)"
}

var all = store.ListQuery{IncludeArchived: true, Limit: 100}

func scopedKinds() []scoped {
	return []scoped{
		{
			name: "agent",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				a := newAgent("a")
				must(t, s.CreateAgent(ctx, a))
				return a.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.GetAgent(ctx, id, 0)
				_, err1 := s.GetAgent(ctx, id, 1)
				_, err2 := s.ListAgentVersions(ctx, id, all)
				return firstErr(err, err1, err2)
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				return idsOf(s.ListAgents(ctx, all))(func(a ma.Agent) string { return a.ID })
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.UpdateAgent(ctx, id, func(cur ma.Agent) (ma.Agent, bool, error) {
					cur.System, cur.Version = "v2", cur.Version+1
					return cur, true, nil
				})
				return err
			},
		},
		{
			name: "environment",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				e := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: "dev", Config: ma.EnvironmentConfig{Type: ma.EnvCloud}, CreatedAt: now(), UpdatedAt: now()}
				must(t, s.CreateEnvironment(ctx, e))
				return e.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.GetEnvironment(ctx, id)
				return err
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				return idsOf(s.ListEnvironments(ctx, all))(func(e ma.Environment) string { return e.ID })
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.UpdateEnvironment(ctx, id, func(cur *ma.Environment) error { cur.Description = "d"; return nil })
				return err
			},
			del: func(s store.Store, ctx context.Context, id string) error { return s.DeleteEnvironment(ctx, id) },
		},
		{
			name: "session",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				sess := ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: "env_x",
					Agent: ma.SessionAgent{ID: "agent_x", Version: 1}, CreatedAt: now(), UpdatedAt: now(), Metadata: ma.Metadata{}}
				_, err := s.CreateSession(ctx, sess, func(tx store.Tx) error { return tx.Append(&ma.Event{Type: ma.EventUserMessage}) })
				must(t, err)
				return sess.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.GetSession(ctx, id)
				_, err1 := s.LastSeq(ctx, id)
				_, err2 := s.ListEvents(ctx, id, store.EventQuery{})
				if err == nil && err1 == nil && err2 == nil {
					// The log reads of another workspace's session are empty.
					for _, raw := range []bool{false, true} {
						var log []store.Entry
						var err error
						if raw {
							log, err = s.ReadLogRaw(ctx, id, 0, 10, 1<<20)
						} else {
							log, err = s.ReadLog(ctx, id, 0, 10)
						}
						if err != nil || len(log) != 1 {
							return fmt.Errorf("log of %s (raw %v): %d entries, %v", id, raw, len(log), err)
						}
					}
				} else if log, _ := s.ReadLog(ctx, id, 0, 10); len(log) > 0 {
					return fmt.Errorf("the log of a session not found has %d entries", len(log))
				}
				return firstErr(err, err1, err2)
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				return idsOf(s.ListSessions(ctx, store.SessionQuery{ListQuery: all}))(func(s ma.Session) string { return s.ID })
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.UpdateSession(ctx, id, func(tx store.Tx) error { tx.Session().Title = "t"; return nil })
				return err
			},
			del: func(s store.Store, ctx context.Context, id string) error { return s.DeleteSession(ctx, id) },
		},
		{
			name: "vault",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				v := ma.Vault{ID: ids.New(ids.Vault), Type: "vault", DisplayName: "v", Metadata: ma.Metadata{}, CreatedAt: now(), UpdatedAt: now()}
				must(t, s.CreateVault(ctx, v))
				return v.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.GetVault(ctx, id)
				return err
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				return idsOf(s.ListVaults(ctx, all))(func(v ma.Vault) string { return v.ID })
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.UpdateVault(ctx, id, func(cur *ma.Vault) error { cur.DisplayName = "w"; return nil })
				_, err1 := s.ArchiveVault(ctx, id, now())
				return firstErr(err, err1)
			},
			del: func(s store.Store, ctx context.Context, id string) error { return s.DeleteVault(ctx, id) },
		},
		{
			// A credential is reached through its vault: its id here is
			// "<vault id>/<credential id>".
			name: "credential",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				v := ma.Vault{ID: ids.New(ids.Vault), Type: "vault", DisplayName: "v", Metadata: ma.Metadata{}, CreatedAt: now(), UpdatedAt: now()}
				must(t, s.CreateVault(ctx, v))
				c := bearer(v.ID, "https://mcp.example.com")
				must(t, s.CreateCredential(ctx, c))
				return v.ID + "/" + c.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				vault, cred, _ := strings.Cut(id, "/")
				_, err := s.GetCredential(ctx, vault, cred)
				if err == nil {
					return nil
				}
				if list, _ := s.ListCredentials(ctx, vault, all); len(list) > 0 {
					return fmt.Errorf("the credentials of a vault not found list %d", len(list))
				}
				return err
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				vaults, err := s.ListVaults(ctx, all)
				var out []string
				for _, v := range vaults {
					creds, err := s.ListCredentials(ctx, v.Value.ID, all)
					if err != nil {
						return nil, err
					}
					for _, c := range creds {
						out = append(out, v.Value.ID+"/"+c.Value.ID)
					}
				}
				return out, err
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				vault, cred, _ := strings.Cut(id, "/")
				_, err := s.UpdateCredential(ctx, vault, cred, func(c *store.Credential) error { x := "x"; c.DisplayName = &x; return nil })
				return err
			},
			del: func(s store.Store, ctx context.Context, id string) error {
				vault, cred, _ := strings.Cut(id, "/")
				return s.DeleteCredential(ctx, vault, cred)
			},
		},
		{
			name: "file",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				f := newFile([]byte("hello"), "")
				must(t, s.CreateFile(ctx, f, bytes.NewReader([]byte("hello"))))
				return f.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.GetFile(ctx, id)
				_, err1 := s.ReadFileChunk(ctx, id, 0)
				return firstErr(err, err1)
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				return idsOf(s.ListFiles(ctx, store.FileQuery{ListQuery: all}))(func(f store.File) string { return f.ID })
			},
			del: func(s store.Store, ctx context.Context, id string) error { return s.DeleteFile(ctx, id) },
		},
		{
			name: "skill",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				sk := store.Skill{Skill: ma.Skill{ID: ids.New(ids.Skill), Type: "skill", DisplayName: "PDF", LatestVersionID: "1",
					Source: ma.SkillSource{Type: "custom"}, CreatedAt: now(), UpdatedAt: now()}, Name: "pdf"}
				must(t, s.CreateSkill(ctx, sk, newSkillVersion(sk.ID, "1", []byte("zip")), bytes.NewReader([]byte("zip"))))
				return sk.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.GetSkill(ctx, id)
				_, err1 := s.GetSkillVersion(ctx, id, "1")
				_, err2 := s.ReadSkillChunk(ctx, id, "1", 0)
				if err != nil {
					if list, _ := s.ListSkillVersions(ctx, id, all); len(list) > 0 {
						return fmt.Errorf("the versions of a skill not found list %d", len(list))
					}
				}
				return firstErr(err, err1, err2)
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				return idsOf(s.ListSkills(ctx, all))(func(sk store.Skill) string { return sk.ID })
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				_, _, err := s.CreateSkillVersion(ctx, newSkillVersion(id, "2", nil), bytes.NewReader(nil))
				return err
			},
			del: func(s store.Store, ctx context.Context, id string) error {
				for _, v := range []string{"1", "2"} {
					if err := s.DeleteSkillVersion(ctx, id, v); err != nil {
						return err
					}
				}
				return s.DeleteSkill(ctx, id)
			},
		},
		{
			name: "dream",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				d := newDream("memstore_scoped", false, time.Now())
				must(t, s.CreateDream(ctx, d))
				return d.ID
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.GetDream(ctx, id)
				return err
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				items, err := s.ListDreams(ctx, store.DreamQuery{ListQuery: all})
				return dreamIDs(items), err
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				_, err := s.UpdateDream(ctx, id, func(d *store.Dream) error { d.Status = ma.DreamRunning; return nil })
				return err
			},
		},
		{
			name: "machine",
			create: func(t *testing.T, s store.Store, ctx context.Context) string {
				m := store.Machine{ID: ids.New("mach_"), Name: "m", EnvironmentIDs: []string{"env_a"}, Hash: ids.New("hash_"), CreatedAt: time.Now()}
				must(t, s.CreateMachine(ctx, m))
				return m.ID + "/" + m.Hash
			},
			get: func(s store.Store, ctx context.Context, id string) error {
				mach, hash, _ := strings.Cut(id, "/")
				_, err := s.GetMachine(ctx, mach)
				_, err1 := s.MachineByHash(ctx, hash)
				return firstErr(err, err1)
			},
			list: func(s store.Store, ctx context.Context) ([]string, error) {
				ms, err := s.ListMachines(ctx)
				var out []string
				for _, m := range ms {
					out = append(out, m.ID+"/"+m.Hash)
				}
				return out, err
			},
			update: func(s store.Store, ctx context.Context, id string) error {
				mach, _, _ := strings.Cut(id, "/")
				_, err := s.RevokeMachine(ctx, mach, time.Now())
				return err
			},
		},
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testWorkspaceScoping: with a workspace in its context, every read, list,
// change and removal of a workspaced object sees only the workspace's
// (another's is not found); without one, every workspace's; a creation
// belongs to the context's workspace, the default one without.
func testWorkspaceScoping(t *testing.T, s store.Store) {
	bg := context.Background()
	ctxA, ctxB := store.WithWorkspace(bg, "wrkspc_a"), store.WithWorkspace(bg, "wrkspc_b")
	ctxDefault := store.WithWorkspace(bg, store.DefaultWorkspace)
	for _, k := range scopedKinds() {
		t.Run(k.name, func(t *testing.T) {
			a, b, d := k.create(t, s, ctxA), k.create(t, s, ctxB), k.create(t, s, bg)
			for _, c := range []struct {
				ctx   context.Context
				id    string
				found bool
			}{
				{ctxA, a, true}, {ctxA, b, false}, {ctxB, a, false}, {ctxB, b, true},
				{bg, a, true}, {bg, b, true}, {bg, d, true},
				{ctxDefault, d, true}, {ctxA, d, false}, {ctxDefault, a, false},
			} {
				err := k.get(s, c.ctx, c.id)
				if c.found && err != nil || !c.found && !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("get %s in %s: %v, want found = %v", c.id, wsOf(c.ctx), err, c.found)
				}
			}
			for _, c := range []struct {
				ctx  context.Context
				want []string
			}{{ctxA, []string{a}}, {ctxB, []string{b}}, {ctxDefault, []string{d}}, {bg, []string{a, b, d}}} {
				got, err := k.list(s, c.ctx)
				slices.Sort(got)
				slices.Sort(c.want)
				if err != nil || !slices.Equal(got, c.want) {
					t.Fatalf("list in %s: %v, %v; want %v", wsOf(c.ctx), got, err, c.want)
				}
			}
			if k.update != nil {
				if err := k.update(s, ctxB, a); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("update from another workspace: %v", err)
				}
				must(t, k.update(s, ctxA, a))
			}
			if k.del != nil {
				if err := k.del(s, ctxB, a); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("delete from another workspace: %v", err)
				}
				must(t, k.get(s, ctxA, a))
				must(t, k.del(s, ctxA, a))
				if err := k.get(s, bg, a); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("get after delete: %v", err)
				}
			}
		})
	}
	t.Run("names", func(t *testing.T) { testWorkspaceNames(t, s) })
}

// testWorkspaceNames: environment names are unique within a workspace
// only; the rows say their workspace where the store's types can.
func testWorkspaceNames(t *testing.T, s store.Store) {
	bg := context.Background()
	ctxA, ctxC := store.WithWorkspace(bg, "wrkspc_a"), store.WithWorkspace(bg, "wrkspc_c")
	e := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: "shared", Config: ma.EnvironmentConfig{Type: ma.EnvCloud}, CreatedAt: now(), UpdatedAt: now()}
	must(t, s.CreateEnvironment(ctxA, e))
	e.ID = ids.New(ids.Environment)
	must(t, s.CreateEnvironment(ctxC, e))
	e.ID = ids.New(ids.Environment)
	if err := s.CreateEnvironment(ctxC, e); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second %q in one workspace: %v", e.Name, err)
	}

	f := newFile([]byte("x"), "")
	must(t, s.CreateFile(ctxC, f, bytes.NewReader([]byte("x"))))
	if got, err := s.GetFile(bg, f.ID); err != nil || got.WorkspaceID != "wrkspc_c" {
		t.Fatalf("file: %q, %v", got.WorkspaceID, err)
	}
	// An output the server stores for a session (no workspace in its
	// context) belongs to the session's workspace.
	sess := ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, CreatedAt: now(), UpdatedAt: now(), Metadata: ma.Metadata{}}
	if _, err := s.CreateSession(ctxC, sess, nil); err != nil {
		t.Fatal(err)
	}
	out := newFile([]byte("y"), sess.ID)
	must(t, s.CreateFile(bg, out, bytes.NewReader([]byte("y"))))
	if got, err := s.GetFile(ctxC, out.ID); err != nil || got.WorkspaceID != "wrkspc_c" {
		t.Fatalf("session output: %q, %v", got.WorkspaceID, err)
	}
	sk := newSkill(t, s, "1", []byte("z"))
	if got, err := s.GetSkill(bg, sk.ID); err != nil || got.WorkspaceID != store.DefaultWorkspace {
		t.Fatalf("skill: %q, %v", got.WorkspaceID, err)
	}
	m := store.Machine{ID: "mach_c", Name: "m", EnvironmentIDs: []string{}, Hash: "mhc", CreatedAt: time.Now()}
	must(t, s.CreateMachine(ctxC, m))
	if got, err := s.GetMachine(bg, m.ID); err != nil || got.WorkspaceID != "wrkspc_c" {
		t.Fatalf("machine: %q, %v", got.WorkspaceID, err)
	}
}
