package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// VaultStore is what RunVaults needs of a backend.
type VaultStore interface {
	store.Vaults
	Close() error
}

// RunVaults runs the vault and credential conformance tests. open must
// return a new empty store; RunVaults closes it. It is generic so that a
// backend can pass the same open function as to Run once store.Store
// includes store.Vaults.
func RunVaults[S VaultStore](t *testing.T, open func(t *testing.T) S) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Vaults)
	}{
		{"Vaults", testVaults},
		{"VaultListPaging", testVaultListPaging},
		{"Credentials", testCredentials},
		{"CredentialUniqueness", testCredentialUniqueness},
		{"SwapCredential", testSwapCredential},
		{"ArchiveVault", testArchiveVault},
		{"DeleteVaultCascades", testDeleteVaultCascades},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tt.fn(t, s)
		})
	}
}

func newVault(t *testing.T, s store.Vaults, name string) ma.Vault {
	t.Helper()
	ts := now()
	v := ma.Vault{ID: ids.New(ids.Vault), Type: "vault", DisplayName: name, Metadata: ma.Metadata{}, CreatedAt: ts, UpdatedAt: ts}
	if err := s.CreateVault(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return v
}

func bearer(vaultID, url string) store.Credential {
	ts := now()
	return store.Credential{
		Credential: ma.Credential{ID: ids.New(ids.Credential), Type: "vault_credential", VaultID: vaultID, Metadata: ma.Metadata{},
			Auth: ma.CredentialAuth{Type: ma.AuthStaticBearer, MCPServerURL: url}, CreatedAt: ts, UpdatedAt: ts},
		Sealed: []byte{1, 2, 3},
	}
}

func testVaults(t *testing.T, s store.Vaults) {
	ctx := context.Background()
	v := newVault(t, s, "prod")
	got, err := s.GetVault(ctx, v.ID)
	if err != nil || got.DisplayName != "prod" || got.ArchivedAt != nil {
		t.Fatalf("GetVault = %+v, %v", got, err)
	}
	if _, err := s.GetVault(ctx, "vlt_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown vault: %v", err)
	}
	up, err := s.UpdateVault(ctx, v.ID, func(cur *ma.Vault) error { cur.DisplayName = "staging"; return nil })
	if err != nil || up.DisplayName != "staging" {
		t.Fatalf("UpdateVault = %+v, %v", up, err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateVault(ctx, v.ID, func(cur *ma.Vault) error { cur.DisplayName = "x"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if got, _ := s.GetVault(ctx, v.ID); got.DisplayName != "staging" {
		t.Fatalf("failed update was written: %q", got.DisplayName)
	}
	if _, err := s.UpdateVault(ctx, "vlt_missing", func(*ma.Vault) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update unknown: %v", err)
	}
	if err := s.DeleteVault(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVault(ctx, v.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("double delete: %v", err)
	}
}

func testVaultListPaging(t *testing.T, s store.Vaults) {
	ctx := context.Background()
	var want []string
	for range 5 {
		want = append(want, newVault(t, s, "v").ID)
	}
	if _, err := s.ArchiveVault(ctx, want[1], now()); err != nil {
		t.Fatal(err)
	}
	page1, err := s.ListVaults(ctx, store.ListQuery{Limit: 2})
	if err != nil || len(page1) != 2 || page1[0].Value.ID != want[0] || page1[1].Value.ID != want[2] {
		t.Fatalf("first page (archived hidden) = %v, %v", page1, err)
	}
	page2, err := s.ListVaults(ctx, store.ListQuery{Limit: 2, After: page1[1].Pos})
	if err != nil || len(page2) != 2 || page2[0].Value.ID != want[3] {
		t.Fatalf("second page = %v, %v", page2, err)
	}
	all, _ := s.ListVaults(ctx, store.ListQuery{Limit: 10, IncludeArchived: true})
	if len(all) != 5 {
		t.Fatalf("with archived: %d vaults, want 5", len(all))
	}
}

func testCredentials(t *testing.T, s store.Vaults) {
	ctx := context.Background()
	v := newVault(t, s, "v")
	c := bearer(v.ID, "https://mcp.example.com/mcp")
	if err := s.CreateCredential(ctx, bearer("vlt_missing", "https://x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("credential in unknown vault: %v", err)
	}
	if err := s.CreateCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCredential(ctx, v.ID, c.ID)
	if err != nil || got.Auth.MCPServerURL != c.Auth.MCPServerURL || !bytes.Equal(got.Sealed, c.Sealed) {
		t.Fatalf("GetCredential = %+v, %v", got, err)
	}
	other := newVault(t, s, "other")
	if _, err := s.GetCredential(ctx, other.ID, c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("credential through another vault: %v", err)
	}
	up, err := s.UpdateCredential(ctx, v.ID, c.ID, func(cur *store.Credential) error {
		cur.Sealed = []byte{9}
		name := "n"
		cur.DisplayName = &name
		return nil
	})
	if err != nil || up.DisplayName == nil || *up.DisplayName != "n" || !bytes.Equal(up.Sealed, []byte{9}) {
		t.Fatalf("UpdateCredential = %+v, %v", up, err)
	}
	got, _ = s.GetCredential(ctx, v.ID, c.ID)
	if !bytes.Equal(got.Sealed, []byte{9}) {
		t.Fatal("sealed blob not updated")
	}
	for i := range 3 {
		if err := s.CreateCredential(ctx, bearer(v.ID, "https://s"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.ListCredentials(ctx, v.ID, store.ListQuery{Limit: 3})
	if err != nil || len(list) != 3 || list[0].Value.ID != c.ID {
		t.Fatalf("ListCredentials = %v, %v", list, err)
	}
	rest, _ := s.ListCredentials(ctx, v.ID, store.ListQuery{Limit: 3, After: list[2].Pos})
	if len(rest) != 1 {
		t.Fatalf("second page: %d credentials, want 1", len(rest))
	}
	if l, _ := s.ListCredentials(ctx, other.ID, store.ListQuery{}); len(l) != 0 {
		t.Fatalf("other vault lists %d credentials", len(l))
	}
	if err := s.DeleteCredential(ctx, other.ID, c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete through another vault: %v", err)
	}
	if err := s.DeleteCredential(ctx, v.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCredential(ctx, v.ID, c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted credential: %v", err)
	}
}

func testCredentialUniqueness(t *testing.T, s store.Vaults) {
	ctx := context.Background()
	v := newVault(t, s, "v")
	a := bearer(v.ID, "https://mcp.example.com")
	if err := s.CreateCredential(ctx, a); err != nil {
		t.Fatal(err)
	}
	dup := bearer(v.ID, a.Auth.MCPServerURL)
	dup.Auth.Type = ma.AuthMCPOAuth
	if err := s.CreateCredential(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second live credential for one URL: %v", err)
	}
	// Another vault may hold a credential for the same URL.
	if err := s.CreateCredential(ctx, bearer(newVault(t, s, "w").ID, a.Auth.MCPServerURL)); err != nil {
		t.Fatal(err)
	}
	// Once the first is archived, the URL is free again.
	if _, err := s.UpdateCredential(ctx, v.ID, a.ID, func(c *store.Credential) error { ts := now(); c.ArchivedAt = &ts; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateCredential(ctx, dup); err != nil {
		t.Fatalf("after archiving: %v", err)
	}
	if _, err := s.UpdateCredential(ctx, v.ID, a.ID, func(c *store.Credential) error { c.ArchivedAt = nil; return nil }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("un-archiving onto a live URL: %v", err)
	}
	env := func(name string) store.Credential {
		c := bearer(v.ID, "")
		c.Auth = ma.CredentialAuth{Type: ma.AuthEnvVar, SecretName: name, Networking: &ma.CredentialNetworking{Type: "unrestricted"}}
		return c
	}
	if err := s.CreateCredential(ctx, env("API_KEY")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateCredential(ctx, env("API_KEY")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate secret_name: %v", err)
	}
}

func testArchiveVault(t *testing.T, s store.Vaults) {
	ctx := context.Background()
	v := newVault(t, s, "v")
	c := bearer(v.ID, "https://a")
	if err := s.CreateCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	at := now()
	got, err := s.ArchiveVault(ctx, v.ID, at)
	if err != nil || got.ArchivedAt == nil || *got.ArchivedAt != at {
		t.Fatalf("ArchiveVault = %+v, %v", got, err)
	}
	again, err := s.ArchiveVault(ctx, v.ID, now())
	if err != nil || *again.ArchivedAt != at {
		t.Fatalf("second archive changed archived_at: %+v, %v", again, err)
	}
	cred, _ := s.GetCredential(ctx, v.ID, c.ID)
	if cred.ArchivedAt == nil {
		t.Fatal("credential of an archived vault is not archived")
	}
	if l, _ := s.ListCredentials(ctx, v.ID, store.ListQuery{}); len(l) != 0 {
		t.Fatalf("archived credentials listed by default: %d", len(l))
	}
	if _, err := s.ArchiveVault(ctx, "vlt_missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("archive unknown: %v", err)
	}
}

func testDeleteVaultCascades(t *testing.T, s store.Vaults) {
	ctx := context.Background()
	v := newVault(t, s, "v")
	c := bearer(v.ID, "https://a")
	if err := s.CreateCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVault(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCredential(ctx, v.ID, c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("credential outlived its vault: %v", err)
	}
}

// testSwapCredential: every write of a credential moves it to the next
// version; SwapCredential writes only at the version given, so of
// concurrent swaps from one version exactly one wins and the others write
// nothing; RefreshUntil is kept as written.
func testSwapCredential(t *testing.T, s store.Vaults) {
	ctx := context.Background()
	v := newVault(t, s, "v")
	c := bearer(v.ID, "https://mcp.example.com/mcp")
	if err := s.CreateCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetCredential(ctx, v.ID, c.ID); err != nil || got.Version != 0 || !got.RefreshUntil.IsZero() {
		t.Fatalf("new credential: version %d, refresh_until %v, %v", got.Version, got.RefreshUntil, err)
	}
	up, err := s.UpdateCredential(ctx, v.ID, c.ID, func(cur *store.Credential) error { cur.Sealed = []byte{4}; return nil })
	if err != nil || up.Version != 1 {
		t.Fatalf("UpdateCredential: version %d, %v", up.Version, err)
	}
	until := time.Now().Add(time.Minute)
	sw, err := s.SwapCredential(ctx, v.ID, c.ID, 1, func(cur *store.Credential) error { cur.RefreshUntil = until; return nil })
	if err != nil || sw.Version != 2 || !sw.RefreshUntil.Equal(until) {
		t.Fatalf("SwapCredential at the current version: %+v, %v", sw, err)
	}
	called := false
	if _, err := s.SwapCredential(ctx, v.ID, c.ID, 1, func(cur *store.Credential) error { called = true; return nil }); !errors.Is(err, store.ErrConflict) || called {
		t.Fatalf("SwapCredential at a past version: %v (fn called: %v), want ErrConflict", err, called)
	}
	boom := errors.New("boom")
	if _, err := s.SwapCredential(ctx, v.ID, c.ID, 2, func(cur *store.Credential) error { cur.Sealed = []byte{5}; return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if _, err := s.SwapCredential(ctx, v.ID, "vcrd_missing", 0, func(*store.Credential) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown credential: %v", err)
	}
	list, err := s.ListCredentials(ctx, v.ID, store.ListQuery{})
	if err != nil || len(list) != 1 || list[0].Value.Version != 2 || !list[0].Value.RefreshUntil.Equal(until) || !bytes.Equal(list[0].Value.Sealed, []byte{4}) {
		t.Fatalf("listed after the swaps: %+v, %v", list, err)
	}

	// Concurrent swaps from one version: one wins.
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := s.SwapCredential(ctx, v.ID, c.ID, 2, func(cur *store.Credential) error { cur.Sealed = []byte{byte(i)}; return nil })
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("swap %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got, _ := s.GetCredential(ctx, v.ID, c.ID); wins.Load() != 1 || got.Version != 3 {
		t.Fatalf("%d concurrent swaps won, version %d; want 1 and 3", wins.Load(), got.Version)
	}
	// Archiving the vault writes its credentials too.
	if _, err := s.ArchiveVault(ctx, v.ID, now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetCredential(ctx, v.ID, c.ID); got.Version != 4 {
		t.Fatalf("after archiving the vault: version %d, want 4", got.Version)
	}
}
