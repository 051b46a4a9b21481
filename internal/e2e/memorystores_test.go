package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/pgtest"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// memErr checks a memory error: its status, type and, for a path
// conflict, the memory it names.
func memErr(t *testing.T, err error, status int, typ, conflicting string) {
	t.Helper()
	apiErr(t, err, status, typ)
	var ae *anthropic.Error
	errors.As(err, &ae)
	if conflicting != "" && !strings.Contains(ae.RawJSON(), `"conflicting_memory_id":"`+conflicting+`"`) {
		t.Fatalf("conflict %s does not name memory %s", ae.RawJSON(), conflicting)
	}
	if ae.Response.Header.Get("x-should-retry") != "false" && status == http.StatusConflict {
		t.Fatalf("409 without x-should-retry: false")
	}
}

// TestMemoryStoresSDK: with the official Go SDK, a developer key makes a
// memory store, writes, renames and deletes memories with preconditions,
// meets path conflicts, lists with prefixes and roll-ups, reads and
// redacts versions that name it as their actor, archives the store
// (read-only, deletable) and deletes it.
func TestMemoryStoresSDK(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) { testMemoryStoresSDK(t, start(t, options{})) })
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn := pgtest.FreshDB(t)
		testMemoryStoresSDK(t, startWith(t, options{}, func(c *app.Config) { c.DatabaseURL = dsn }))
	})
}

func testMemoryStoresSDK(t *testing.T, s *server) {
	ctx := context.Background()
	dev := s.developer(t, "wrkspc_default", "memory-dev", "developer")
	c := dev.client.Beta.MemoryStores
	ms, err := c.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "User Preferences", Description: anthropic.String("what the user likes"),
		Metadata: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ms.ID, "memstore_") || ms.Name != "User Preferences" || ms.Metadata["team"] != "a" || !ms.ArchivedAt.IsZero() {
		t.Fatalf("created %+v", ms)
	}
	up, err := c.Update(ctx, ms.ID, anthropic.BetaMemoryStoreUpdateParams{Description: anthropic.String("")})
	if err != nil || up.Description != "" || up.Name != ms.Name {
		t.Fatalf("update = %+v, %v", up, err)
	}
	_, err = c.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "bad\x01name"})
	apiErr(t, err, 400, "invalid_request_error")

	mems := c.Memories
	todo, err := mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/notes/todo.md", Content: anthropic.String("buy milk")})
	if err != nil {
		t.Fatal(err)
	}
	if todo.ContentSha256 != sha256Hex("buy milk") || todo.ContentSizeBytes != 8 || todo.JSON.Content.Raw() != "null" {
		t.Fatalf("created memory (basic view) %+v", todo)
	}
	empty, err := mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/empty.md", Content: anthropic.String(""),
		View: anthropic.BetaManagedAgentsMemoryViewFull})
	if err != nil || empty.Content != "" || empty.JSON.Content.Raw() != `""` {
		t.Fatalf("empty memory = %+v, %v", empty, err)
	}
	// Taken and overlapping paths, and invalid paths and contents.
	for _, p := range []string{"/notes/todo.md", "/notes", "/notes/todo.md/deeper"} {
		_, err := mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: anthropic.String("x")})
		memErr(t, err, 409, "memory_path_conflict_error", todo.ID)
	}
	for _, p := range []string{"notes", "/a/../b", "/a//b", "/e\u0301.md", "/trailing/"} {
		_, err := mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: anthropic.String("x")})
		apiErr(t, err, 400, "invalid_request_error")
	}
	_, err = mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/big", Content: anthropic.String(strings.Repeat("x", 102401))})
	apiErr(t, err, 400, "invalid_request_error")
	if _, err := mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/max", Content: anthropic.String(strings.Repeat("x", 102400))}); err != nil {
		t.Fatalf("a 100 kB memory: %v", err)
	}

	// Update with a stale precondition fails; with the right one it
	// changes; a no-op records no version; a rename keeps the id.
	_, err = mems.Update(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Content: anthropic.String("buy eggs"),
		Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(sha256Hex("stale"))}})
	memErr(t, err, 409, "memory_precondition_failed_error", "")
	eggs, err := mems.Update(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Content: anthropic.String("buy eggs"),
		Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(todo.ContentSha256)}})
	if err != nil || eggs.ContentSha256 != sha256Hex("buy eggs") || eggs.MemoryVersionID == todo.MemoryVersionID {
		t.Fatalf("update = %+v, %v", eggs, err)
	}
	same, err := mems.Update(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Content: anthropic.String("buy eggs"),
		Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(todo.ContentSha256)}})
	if err != nil || same.MemoryVersionID != eggs.MemoryVersionID {
		t.Fatalf("no-op update with the old sha = %+v, %v; want success without a version", same, err)
	}
	_, err = mems.Update(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Path: anthropic.String("/empty.md/x")})
	memErr(t, err, 409, "memory_path_conflict_error", empty.ID)
	moved, err := mems.Update(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Path: anthropic.String("/done/todo.md"),
		View: anthropic.BetaManagedAgentsMemoryViewFull})
	if err != nil || moved.ID != todo.ID || moved.Path != "/done/todo.md" || moved.Content != "buy eggs" {
		t.Fatalf("rename = %+v, %v", moved, err)
	}
	got, err := mems.Get(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: ms.ID})
	if err != nil || got.Content != "buy eggs" || got.Path != "/done/todo.md" {
		t.Fatalf("get (full by default) = %+v, %v", got, err)
	}

	// Lists: whole store, a prefix, depth 1 roll-ups, pages.
	for _, p := range []string{"/done/old/a.md", "/done/old/b.md", "/done-archive.md"} {
		if _, err := mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: anthropic.String(p)}); err != nil {
			t.Fatal(err)
		}
	}
	paths := func(p anthropic.BetaMemoryStoreMemoryListParams) []string {
		t.Helper()
		var out []string
		it := mems.ListAutoPaging(ctx, ms.ID, p)
		for it.Next() {
			out = append(out, it.Current().Type+":"+it.Current().Path)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(got []string, want string) {
		t.Helper()
		if strings.Join(got, " ") != want {
			t.Fatalf("list = %v, want %s", got, want)
		}
	}
	check(paths(anthropic.BetaMemoryStoreMemoryListParams{Limit: anthropic.Int(2)}),
		"memory:/done-archive.md memory:/done/old/a.md memory:/done/old/b.md memory:/done/todo.md memory:/empty.md memory:/max")
	check(paths(anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: anthropic.String("/done/")}),
		"memory:/done/old/a.md memory:/done/old/b.md memory:/done/todo.md")
	check(paths(anthropic.BetaMemoryStoreMemoryListParams{Depth: anthropic.Int(1), Limit: anthropic.Int(1)}),
		"memory:/done-archive.md memory_prefix:/done/ memory:/empty.md memory:/max")
	check(paths(anthropic.BetaMemoryStoreMemoryListParams{Depth: anthropic.Int(1), PathPrefix: anthropic.String("/done/")}),
		"memory_prefix:/done/old/ memory:/done/todo.md")
	_, err = mems.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryListParams{Depth: anthropic.Int(2)})
	apiErr(t, err, 400, "invalid_request_error")
	_, err = mems.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: anthropic.String("/done")})
	apiErr(t, err, 400, "invalid_request_error")
	full, err := mems.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryListParams{Limit: anthropic.Int(100), View: anthropic.BetaManagedAgentsMemoryViewFull})
	if err != nil || len(full.Data) != 6 || full.Data[0].Content != "/done-archive.md" {
		t.Fatalf("full list = %+v, %v", full, err)
	}

	// Delete with a stale expectation, then the right one.
	_, err = mems.Delete(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: ms.ID, ExpectedContentSha256: anthropic.String(sha256Hex("buy milk"))})
	memErr(t, err, 409, "memory_precondition_failed_error", "")
	del, err := mems.Delete(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: ms.ID, ExpectedContentSha256: anthropic.String(sha256Hex("buy eggs"))})
	if err != nil || del.ID != todo.ID || string(del.Type) != "memory_deleted" {
		t.Fatalf("delete = %+v, %v", del, err)
	}
	_, err = mems.Get(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: ms.ID})
	apiErr(t, err, 404, "not_found_error")

	checkVersions(t, dev, ms.ID, todo.ID)
	checkMemoryRefusals(t, s, ms.ID, empty.ID)

	// Archived: read-only, but memories can be read and deleted and the
	// store deleted.
	arch, err := c.Archive(ctx, ms.ID, anthropic.BetaMemoryStoreArchiveParams{})
	if err != nil || arch.ArchivedAt.IsZero() {
		t.Fatalf("archive = %+v, %v", arch, err)
	}
	_, err = mems.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/new.md", Content: anthropic.String("x")})
	apiErr(t, err, 409, "invalid_request_error")
	_, err = mems.Update(ctx, empty.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Content: anthropic.String("x")})
	apiErr(t, err, 409, "invalid_request_error")
	_, err = c.Update(ctx, ms.ID, anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String("renamed")})
	apiErr(t, err, 409, "invalid_request_error")
	if _, err := mems.Delete(ctx, empty.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: ms.ID}); err != nil {
		t.Fatalf("delete in an archived store: %v", err)
	}
	list, err := c.List(ctx, anthropic.BetaMemoryStoreListParams{})
	if err != nil || len(list.Data) != 0 {
		t.Fatalf("list without archived = %+v, %v", list.Data, err)
	}
	list, err = c.List(ctx, anthropic.BetaMemoryStoreListParams{IncludeArchived: anthropic.Bool(true)})
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != ms.ID {
		t.Fatalf("list with archived = %+v, %v", list.Data, err)
	}
	gone, err := c.Delete(ctx, ms.ID, anthropic.BetaMemoryStoreDeleteParams{})
	if err != nil || gone.ID != ms.ID || string(gone.Type) != "memory_store_deleted" {
		t.Fatalf("delete store = %+v, %v", gone, err)
	}
	_, err = c.Get(ctx, ms.ID, anthropic.BetaMemoryStoreGetParams{})
	apiErr(t, err, 404, "not_found_error")

	checkMemoryBetaHeader(t, s)
}

// checkVersions checks the versions of the deleted memory todo: created,
// modified twice (content, rename), deleted, newest first, each by the
// developer's key; the filters; get; redact.
func checkVersions(t *testing.T, dev *wsKit, storeID, todo string) {
	t.Helper()
	ctx := context.Background()
	vs := dev.client.Beta.MemoryStores.MemoryVersions
	page, err := vs.List(ctx, storeID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(todo)})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, v := range page.Data {
		ops = append(ops, string(v.Operation))
		if v.CreatedBy.Type != "api_actor" || !strings.HasPrefix(v.CreatedBy.APIKeyID, "key_") {
			t.Fatalf("version %s created by %+v, want the developer's key", v.ID, v.CreatedBy)
		}
		if v.JSON.Content.Raw() != "null" {
			t.Fatalf("basic version with content: %s", v.RawJSON())
		}
	}
	if strings.Join(ops, " ") != "deleted modified modified created" {
		t.Fatalf("versions of %s: %v", todo, ops)
	}
	keyID := page.Data[0].CreatedBy.APIKeyID
	for _, c := range []struct {
		p    anthropic.BetaMemoryStoreMemoryVersionListParams
		want int
	}{
		{anthropic.BetaMemoryStoreMemoryVersionListParams{Operation: anthropic.BetaManagedAgentsMemoryVersionOperationDeleted}, 1},
		{anthropic.BetaMemoryStoreMemoryVersionListParams{APIKeyID: anthropic.String(keyID), Limit: anthropic.Int(100)}, 9},
		{anthropic.BetaMemoryStoreMemoryVersionListParams{SessionID: anthropic.String("sesn_none")}, 0},
	} {
		got, err := vs.List(ctx, storeID, c.p)
		if err != nil || len(got.Data) != c.want {
			t.Fatalf("versions with %+v: %d, %v; want %d", c.p, len(got.Data), err, c.want)
		}
	}
	created := page.Data[3]
	v, err := vs.Get(ctx, created.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: storeID})
	if err != nil || v.Content != "buy milk" || v.Path != "/notes/todo.md" {
		t.Fatalf("get version = %+v, %v", v, err)
	}
	red, err := vs.Redact(ctx, created.ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: storeID})
	if err != nil || red.JSON.Content.Raw() != "null" || red.JSON.Path.Raw() != "null" || red.RedactedAt.IsZero() || red.RedactedBy.APIKeyID != keyID {
		t.Fatalf("redact = %s, %v", red.RawJSON(), err)
	}
	v, err = vs.Get(ctx, created.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: storeID})
	if err != nil || v.JSON.Content.Raw() != "null" || v.CreatedBy.APIKeyID != keyID {
		t.Fatalf("redacted version = %s, %v", v.RawJSON(), err)
	}
}

// checkMemoryBetaHeader: the memory endpoints take either beta header,
// not none and not both.
func checkMemoryBetaHeader(t *testing.T, s *server) {
	t.Helper()
	for _, c := range []struct {
		beta   string
		status int
	}{
		{"agent-memory-2026-07-22", 200},
		{"managed-agents-2026-04-01", 200},
		{"", 400},
		{"agent-memory-2026-07-22,managed-agents-2026-04-01", 400},
	} {
		st, err := callWith(s.url, "GET", "/v1/memory_stores", nil, nil, func(h map[string]string) {
			h["x-api-key"] = s.key
			if c.beta != "" {
				h["anthropic-beta"] = c.beta
			}
		})
		if st != c.status { // err is set for a status over 299

			t.Errorf("beta %q: %d, %v; want %d", c.beta, st, err, c.status)
		}
	}
}

// checkMemoryRefusals: unknown and unsupported fields are a 400 naming
// them, never dropped.
func checkMemoryRefusals(t *testing.T, s *server, storeID, memoryID string) {
	t.Helper()
	for _, c := range []struct {
		method, path, body, says string
	}{
		{"POST", "/v1/memory_stores", `{"name":"n","descripton":"d"}`, "descripton"},
		{"POST", "/v1/memory_stores/" + storeID + "/memories", `{"path":"/p","contnet":"x"}`, "contnet"},
		{"POST", "/v1/memory_stores/" + storeID + "/memories", `{"path":"/p"}`, "content: required"},
		{"POST", "/v1/memory_stores/" + storeID + "/memories/" + memoryID, `{"content":null}`, "content: cannot be null"},
		{"POST", "/v1/memory_stores/" + storeID + "/memories/" + memoryID, `{"precondition":{"type":"etag","content_sha256":"x"}}`, "precondition.type"},
		{"POST", "/v1/memory_stores/" + storeID + "/memories/" + memoryID, `{"precondition":{"type":"content_sha256","content_sha256":"ABC"}}`, "precondition.content_sha256"},
		{"POST", "/v1/memory_stores/" + storeID + "/archive", `{"force":true}`, "force"},
		{"GET", "/v1/memory_stores/" + storeID + "/memories?view=everything", "", "view"},
		{"GET", "/v1/memory_stores/" + storeID + "/memory_versions?operation=renamed", "", "operation"},
	} {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(c.body))
		req.Header.Set("x-api-key", s.key)
		req.Header.Set("anthropic-beta", "agent-memory-2026-07-22")
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf strings.Builder
		io.Copy(&buf, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(buf.String(), c.says) {
			t.Errorf("%s %s %s: %d %s; want a 400 saying %q", c.method, c.path, c.body, resp.StatusCode, buf.String(), c.says)
		}
	}
}

// TestMemoryStoresWorkspaces: another workspace's memory store, its
// memories and versions are not found, and not listed.
func TestMemoryStoresWorkspaces(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	var kits [2]*wsKit
	for i, name := range []string{"mem-a", "mem-b"} {
		w, err := s.client.Organization.Workspaces.New(ctx, anthropic.OrganizationWorkspaceNewParams{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		kits[i] = s.developer(t, w.ID, "dev-"+name, "developer")
	}
	a := kits[0].client.Beta.MemoryStores
	ms, err := a.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "a's"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/x", Content: anthropic.String("x")})
	if err != nil {
		t.Fatal(err)
	}
	b := kits[1].client.Beta.MemoryStores
	_, err = b.Get(ctx, ms.ID, anthropic.BetaMemoryStoreGetParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = b.Memories.Get(ctx, m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: ms.ID})
	apiErr(t, err, 404, "not_found_error")
	_, err = b.Memories.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryListParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = b.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/y", Content: anthropic.String("y")})
	apiErr(t, err, 404, "not_found_error")
	_, err = b.Memories.Delete(ctx, m.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: ms.ID})
	apiErr(t, err, 404, "not_found_error")
	_, err = b.MemoryVersions.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = b.MemoryVersions.Get(ctx, m.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: ms.ID})
	apiErr(t, err, 404, "not_found_error")
	_, err = b.Delete(ctx, ms.ID, anthropic.BetaMemoryStoreDeleteParams{})
	apiErr(t, err, 404, "not_found_error")
	list, err := b.List(ctx, anthropic.BetaMemoryStoreListParams{IncludeArchived: anthropic.Bool(true)})
	if err != nil || len(list.Data) != 0 {
		t.Fatalf("b lists %+v, %v", list.Data, err)
	}
	// The admin reaches it with the workspace header only.
	_, err = s.client.Beta.MemoryStores.Get(ctx, ms.ID, anthropic.BetaMemoryStoreGetParams{})
	apiErr(t, err, 404, "not_found_error")
	if _, err := s.client.Beta.MemoryStores.Get(ctx, ms.ID, anthropic.BetaMemoryStoreGetParams{}, option.WithHeader("anthropic-workspace-id", kits[0].ws)); err != nil {
		t.Fatalf("admin with the header: %v", err)
	}
	// Still there for its owner.
	if _, err := a.Memories.Get(ctx, m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: ms.ID}); err != nil {
		t.Fatal(err)
	}
}
