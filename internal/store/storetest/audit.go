package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// testWorkspaces: the default workspace is a row listed only on request;
// workspaces are created, read, changed, archived, filtered and paged.
func testWorkspaces(t *testing.T, s store.Store) {
	ctx := context.Background()
	def, err := s.GetWorkspace(ctx, store.DefaultWorkspace)
	if err != nil || def.Name != "Default" || def.ArchivedAt != nil || def.CreatedAt.IsZero() {
		t.Fatalf("default workspace: %+v, %v", def, err)
	}
	var made []string
	for _, name := range []string{"one", "two", "three"} {
		w := store.Workspace{ID: ids.New(ids.Workspace), Name: name, DisplayColor: "#6C5BB9", Tags: map[string]string{"team": name}, CreatedAt: time.Now()}
		must(t, s.CreateWorkspace(ctx, w))
		made = append(made, w.ID)
	}
	if err := s.CreateWorkspace(ctx, store.Workspace{ID: made[0], Name: "again", CreatedAt: time.Now()}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("same id twice: %v", err)
	}
	got, err := s.GetWorkspace(ctx, made[1])
	if err != nil || got.Name != "two" || got.DisplayColor != "#6C5BB9" || got.Tags["team"] != "two" {
		t.Fatalf("GetWorkspace = %+v, %v", got, err)
	}
	if _, err := s.GetWorkspace(ctx, "wrkspc_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown workspace: %v", err)
	}
	at := time.Now().UTC()
	up, err := s.UpdateWorkspace(ctx, made[1], func(w *store.Workspace) error {
		w.Name, w.Tags, w.ArchivedAt = "deux", map[string]string{}, &at
		return nil
	})
	if err != nil || up.Name != "deux" || len(up.Tags) != 0 || up.ArchivedAt == nil {
		t.Fatalf("UpdateWorkspace = %+v, %v", up, err)
	}
	if got, _ := s.GetWorkspace(ctx, made[1]); got.Name != "deux" || got.ArchivedAt == nil || !got.ArchivedAt.Equal(at) {
		t.Fatalf("update not stored: %+v", got)
	}
	if _, err := s.UpdateWorkspace(ctx, "wrkspc_missing", func(*store.Workspace) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update unknown: %v", err)
	}
	if _, err := s.UpdateWorkspace(ctx, store.DefaultWorkspace, func(w *store.Workspace) error { w.ArchivedAt = &at; return nil }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("archiving the default workspace: %v", err)
	}
	if got, _ := s.GetWorkspace(ctx, store.DefaultWorkspace); got.ArchivedAt != nil {
		t.Fatal("the default workspace was archived")
	}
	list := func(q store.WorkspaceQuery) []string {
		t.Helper()
		items, err := s.ListWorkspaces(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Value.ID)
		}
		return out
	}
	for _, c := range []struct {
		q    store.WorkspaceQuery
		want []string
	}{
		{store.WorkspaceQuery{}, []string{made[0], made[2]}},
		{store.WorkspaceQuery{IncludeDefault: true}, []string{store.DefaultWorkspace, made[0], made[2]}},
		{store.WorkspaceQuery{ListQuery: store.ListQuery{IncludeArchived: true}}, made},
		{store.WorkspaceQuery{ListQuery: store.ListQuery{IncludeArchived: true, Desc: true, Limit: 2}}, []string{made[2], made[1]}},
		{store.WorkspaceQuery{IDs: []string{made[2], store.DefaultWorkspace}}, []string{made[2]}},
		{store.WorkspaceQuery{IDs: []string{made[2], store.DefaultWorkspace}, IncludeDefault: true}, []string{store.DefaultWorkspace, made[2]}},
	} {
		if got := list(c.q); !slices.Equal(got, c.want) {
			t.Fatalf("ListWorkspaces(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
	first, _ := s.ListWorkspaces(ctx, store.WorkspaceQuery{ListQuery: store.ListQuery{Limit: 1}})
	if got := list(store.WorkspaceQuery{ListQuery: store.ListQuery{After: first[0].Pos}}); !slices.Equal(got, []string{made[2]}) {
		t.Fatalf("page after %d: %v", first[0].Pos, got)
	}
}

// testKeyAdmin: keys have a role, a workspace, a status and a creator;
// archiving is revoking, for good.
func testKeyAdmin(t *testing.T, s store.Store) {
	ctx := context.Background()
	admin := store.APIKey{ID: ids.New(ids.APIKey), Name: "root", Hash: "ha", Hint: "aaaa", CreatedAt: time.Now()}
	must(t, s.CreateAPIKey(ctx, admin))
	dev := store.APIKey{ID: ids.New(ids.APIKey), Name: "dev", Hash: "hd", Hint: "dddd", CreatedAt: time.Now(),
		Role: store.RoleDeveloper, WorkspaceID: "wrkspc_a", Status: store.KeyInactive, CreatedByKeyID: admin.ID}
	must(t, s.CreateAPIKey(ctx, dev))
	if got, err := s.APIKeyByHash(ctx, "ha"); err != nil || got.Role != store.RoleAdmin || got.Status != store.KeyActive || got.WorkspaceID != "" {
		t.Fatalf("a key made without role and status: %+v, %v", got, err)
	}
	got, err := s.GetAPIKey(ctx, dev.ID)
	if err != nil || got.Role != store.RoleDeveloper || got.WorkspaceID != "wrkspc_a" || got.Status != store.KeyInactive || got.CreatedByKeyID != admin.ID || got.Hint != "dddd" {
		t.Fatalf("GetAPIKey = %+v, %v", got, err)
	}
	if _, err := s.GetAPIKey(ctx, "key_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	up, err := s.UpdateAPIKey(ctx, dev.ID, func(k *store.APIKey) error {
		k.Name, k.Status, k.Hash = "developer", store.KeyActive, "changed"
		return nil
	})
	if err != nil || up.Name != "developer" || up.Status != store.KeyActive || up.Hash != "hd" || up.RevokedAt != nil {
		t.Fatalf("UpdateAPIKey = %+v, %v", up, err)
	}
	if got, err := s.APIKeyByHash(ctx, "hd"); err != nil || got.Name != "developer" || got.Status != store.KeyActive {
		t.Fatalf("update not stored: %+v, %v", got, err)
	}
	up, err = s.UpdateAPIKey(ctx, dev.ID, func(k *store.APIKey) error { k.Status = store.KeyArchived; return nil })
	if err != nil || up.Status != store.KeyArchived || up.RevokedAt == nil {
		t.Fatalf("archive: %+v, %v", up, err)
	}
	if _, err := s.UpdateAPIKey(ctx, dev.ID, func(k *store.APIKey) error { k.Status = store.KeyActive; return nil }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("un-archiving: %v", err)
	}
	if got, _ := s.GetAPIKey(ctx, dev.ID); got.Status != store.KeyArchived || got.RevokedAt == nil {
		t.Fatalf("after the refused un-archive: %+v", got)
	}
	if _, err := s.UpdateAPIKey(ctx, "key_missing", func(*store.APIKey) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update unknown: %v", err)
	}
	must(t, s.RevokeAPIKey(ctx, admin.ID, time.Now()))
	keys, err := s.ListAPIKeys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListAPIKeys = %v, %v", keys, err)
	}
	for _, k := range keys {
		if k.Status != store.KeyArchived || k.RevokedAt == nil {
			t.Fatalf("listed %+v, want archived", k)
		}
		if k.ID == dev.ID && (k.Role != store.RoleDeveloper || k.WorkspaceID != "wrkspc_a" || k.CreatedByKeyID != admin.ID) {
			t.Fatalf("listed %+v", k)
		}
	}
}

// testAudit: a change made with an audit entry in its context records it
// in its transaction; a change that fails records nothing.
func testAudit(t *testing.T, s store.Store) {
	bg := context.Background()
	n := 0
	with := func(action string) context.Context {
		n++
		return store.WithAudit(store.WithWorkspace(bg, "wrkspc_a"), store.AuditEvent{ActorKeyID: "key_actor", Action: action,
			TargetType: strings.Split(action, ".")[0], WorkspaceID: "wrkspc_a", Details: json.RawMessage(`{"n":1}`)})
	}
	failed := func(action string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s did not fail", action)
		}
		n-- // its entry must not be there
	}
	k := store.APIKey{ID: ids.New(ids.APIKey), Hash: "h", CreatedAt: time.Now()}
	must(t, s.CreateAPIKey(with("api_key.created"), k))
	failed("api_key.created", s.CreateAPIKey(with("api_key.created"), k))
	_, err := s.UpdateAPIKey(with("api_key.updated"), k.ID, func(k *store.APIKey) error { k.Name = "n"; return nil })
	must(t, err)
	_, err = s.UpdateAPIKey(with("api_key.updated"), "key_missing", func(k *store.APIKey) error { return nil })
	failed("api_key.updated", err)
	_, err = s.UpdateAPIKey(with("api_key.updated"), k.ID, func(k *store.APIKey) error { return errors.New("refused") })
	failed("api_key.updated", err)
	must(t, s.RevokeAPIKey(with("api_key.archived"), k.ID, time.Now()))
	failed("api_key.archived", s.RevokeAPIKey(with("api_key.archived"), "key_missing", time.Now()))

	w := store.Workspace{ID: ids.New(ids.Workspace), Name: "w", CreatedAt: time.Now()}
	must(t, s.CreateWorkspace(with("workspace.created"), w))
	failed("workspace.created", s.CreateWorkspace(with("workspace.created"), w))
	_, err = s.UpdateWorkspace(with("workspace.updated"), w.ID, func(w *store.Workspace) error { w.Name = "v"; return nil })
	must(t, err)
	_, err = s.UpdateWorkspace(with("workspace.archived"), store.DefaultWorkspace, func(w *store.Workspace) error { now := time.Now(); w.ArchivedAt = &now; return nil })
	failed("workspace.archived", err)

	v := ma.Vault{ID: ids.New(ids.Vault), Type: "vault", DisplayName: "v", Metadata: ma.Metadata{}, CreatedAt: now(), UpdatedAt: now()}
	must(t, s.CreateVault(with("vault.created"), v))
	_, err = s.UpdateVault(with("vault.updated"), v.ID, func(v *ma.Vault) error { v.DisplayName = "w"; return nil })
	must(t, err)
	_, err = s.UpdateVault(with("vault.updated"), v.ID, func(v *ma.Vault) error { return errors.New("refused") })
	failed("vault.updated", err)
	// Another workspace's vault is not found: nothing is recorded.
	_, err = s.UpdateVault(store.WithWorkspace(with("vault.updated"), "wrkspc_b"), v.ID, func(v *ma.Vault) error { return nil })
	failed("vault.updated", err)
	c := bearer(v.ID, "https://mcp.example.com")
	must(t, s.CreateCredential(with("vault_credential.created"), c))
	failed("vault_credential.created", s.CreateCredential(with("vault_credential.created"), bearer(v.ID, "https://mcp.example.com")))
	_, err = s.UpdateCredential(with("vault_credential.updated"), v.ID, c.ID, func(*store.Credential) error { return nil })
	must(t, err)
	must(t, s.DeleteCredential(with("vault_credential.deleted"), v.ID, c.ID))
	failed("vault_credential.deleted", s.DeleteCredential(with("vault_credential.deleted"), v.ID, c.ID))
	_, err = s.ArchiveVault(with("vault.archived"), v.ID, now())
	must(t, err)
	must(t, s.DeleteVault(with("vault.deleted"), v.ID))
	failed("vault.deleted", s.DeleteVault(with("vault.deleted"), v.ID))

	// Without an entry in the context, a change records nothing.
	must(t, s.CreateVault(bg, ma.Vault{ID: ids.New(ids.Vault), Type: "vault", Metadata: ma.Metadata{}, CreatedAt: now(), UpdatedAt: now()}))

	want := []string{"api_key.created", "api_key.updated", "api_key.archived", "workspace.created", "workspace.updated",
		"vault.created", "vault.updated", "vault_credential.created", "vault_credential.updated", "vault_credential.deleted", "vault.archived", "vault.deleted"}
	if n != len(want) {
		t.Fatalf("the test counts %d entries, lists %d", n, len(want))
	}
	items, err := s.ListAudit(bg, store.AuditQuery{ListQuery: store.ListQuery{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		e := it.Value
		got = append(got, e.Action)
		if !strings.HasPrefix(e.ID, ids.AuditEvent) || time.Since(e.At) > time.Minute || e.ActorKeyID != "key_actor" || e.WorkspaceID != "wrkspc_a" || string(e.Details) != `{"n":1}` {
			t.Fatalf("entry %+v", e)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("audit log: %v\nwant %v", got, want)
	}
	newest, err := s.ListAudit(bg, store.AuditQuery{ListQuery: store.ListQuery{Desc: true, Limit: 2}, Action: "vault.updated", WorkspaceID: "wrkspc_a"})
	if err != nil || len(newest) != 1 || newest[0].Value.Action != "vault.updated" {
		t.Fatalf("filtered: %+v, %v", newest, err)
	}
	if other, err := s.ListAudit(bg, store.AuditQuery{WorkspaceID: "wrkspc_b"}); err != nil || len(other) != 0 {
		t.Fatalf("another workspace's log: %+v, %v", other, err)
	}
	at := time.Unix(0, 42).UTC()
	must(t, s.CreateWorkspace(store.WithAudit(bg, store.AuditEvent{ID: "audit_given", At: at, Actor: "cli", Action: "workspace.created"}),
		store.Workspace{ID: ids.New(ids.Workspace), Name: "x", CreatedAt: time.Now()}))
	last, err := s.ListAudit(bg, store.AuditQuery{ListQuery: store.ListQuery{Desc: true, Limit: 1}})
	if err != nil || len(last) != 1 || last[0].Value.ID != "audit_given" || !last[0].Value.At.Equal(at) || last[0].Value.Actor != "cli" || last[0].Value.Details != nil {
		t.Fatalf("newest entry: %+v, %v", last, err)
	}
}
