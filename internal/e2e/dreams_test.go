package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// dreamKit is what a dream reads: a memory store of three memories and
// two sessions that said something.
type dreamKit struct {
	s        *server
	store    string
	sessions []string
}

// newDreamKit makes the memory store "Team Notes" and two finished
// sessions ("hello from session 1" and 2, echoed by the scripted model).
func newDreamKit(t *testing.T, s *server) *dreamKit {
	t.Helper()
	ctx := context.Background()
	ms, err := s.client.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "Team Notes", Description: anthropic.String("what the team knows")})
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{"/prefs/editor.md": "vim", "/facts/db.md": "postgres 16", "/todo.md": "ship dreams"} {
		if _, err := s.client.Beta.MemoryStores.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: path, Content: anthropic.String(content)}); err != nil {
			t.Fatal(err)
		}
	}
	k := &dreamKit{s: s, store: ms.ID}
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "dream inputs")
	for i := range 2 {
		sess := s.newSession(t, a.ID, env.ID)
		st := s.openStream(t, sess.ID)
		s.send(t, sess.ID, userMessage(fmt.Sprintf("hello from session %d", i+1)))
		st.until(isIdle)
		st.cancel()
		k.sessions = append(k.sessions, sess.ID)
	}
	return k
}

// params is a create request over the kit's store and sessions with the
// scripted model and these instructions (a script of the dream agent).
func (k *dreamKit) params(instructions string, behavior anthropic.BetaOutputBehaviorUnionParam) anthropic.BetaDreamNewParams {
	return anthropic.BetaDreamNewParams{
		Inputs: []anthropic.BetaDreamInputUnionParam{anthropic.BetaDreamInputParamOfMemoryStore(k.store),
			anthropic.BetaDreamInputParamOfSessions([]string{k.sessions[1], k.sessions[0]})},
		Model:        anthropic.BetaDreamNewParamsModelUnion{OfString: anthropic.String("scripted")},
		Instructions: anthropic.String(instructions), OutputBehavior: behavior}
}

// waitDream polls the dream until ok says so, for up to a minute.
func (s *server) waitDream(t *testing.T, id string, ok func(*anthropic.BetaDream) bool) *anthropic.BetaDream {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		d, err := s.client.Beta.Dreams.Get(context.Background(), id, anthropic.BetaDreamGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("dream %s: gave up waiting, it is %s", id, d.RawJSON())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ended reports whether a dream's status is final.
func ended(d *anthropic.BetaDream) bool {
	return d.Status != anthropic.BetaDreamStatusPending && d.Status != anthropic.BetaDreamStatusRunning
}

// memorySnapshot lists a store's memories as "path sha256".
func (s *server) memorySnapshot(t *testing.T, storeID string) []string {
	t.Helper()
	var out []string
	it := s.client.Beta.MemoryStores.Memories.ListAutoPaging(context.Background(), storeID, anthropic.BetaMemoryStoreMemoryListParams{})
	for it.Next() {
		out = append(out, it.Current().Path+" "+it.Current().ContentSha256)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// versionSnapshot lists a store's versions as "id operation path".
func (s *server) versionSnapshot(t *testing.T, storeID string) []string {
	t.Helper()
	var out []string
	it := s.client.Beta.MemoryStores.MemoryVersions.ListAutoPaging(context.Background(), storeID, anthropic.BetaMemoryStoreMemoryVersionListParams{})
	for it.Next() {
		v := it.Current()
		out = append(out, v.ID+" "+string(v.Operation)+" "+v.Path)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDreamCreateNew: with the official Go SDK, a dream over a memory
// store and two sessions is created pending (sessions listed sorted, the
// model as an object), runs as a session of the built-in dream agent in
// the no-network dreams environment (its first message carries the
// instructions, which script the agent here; the transcripts of both
// sessions are files under /workspace/transcripts) and completes: its
// output is a new store named after the input and the dream, with the
// input's description, that started as a copy of the input's memories
// and holds what the dream agent wrote in its mount (a change, a new
// memory, a deletion: versions by the dream's session), while the input
// store's memories and versions are as they were; its usage is the
// session's. On SQLite and on PostgreSQL.
func TestDreamCreateNew(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) { testDreamCreateNew(t, start(t, options{})) })
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn := pgtest.FreshDB(t)
		testDreamCreateNew(t, startWith(t, options{}, func(c *app.Config) { c.DatabaseURL = dsn }))
	})
}

func testDreamCreateNew(t *testing.T, s *server) {
	ctx := context.Background()
	k := newDreamKit(t, s)
	memories, versions := s.memorySnapshot(t, k.store), s.versionSnapshot(t, k.store)
	script := `@tool bash {"command":"ls /workspace/transcripts; grep -h '^# Session' /workspace/transcripts/*.md; grep -ch 'hello from session' /workspace/transcripts/*.md; ` +
		`cd /mnt/memory/*/ && echo neovim > prefs/editor.md && mkdir insights && echo 'dreams run as sessions' > insights/dreams.md && rm todo.md && pwd"}` + "\n@then dreamt"
	d, err := s.client.Beta.Dreams.New(ctx, k.params(script, anthropic.BetaOutputBehaviorUnionParam{}))
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Sorted(slices.Values(k.sessions))
	if !strings.HasPrefix(d.ID, "drm_") || d.Status != anthropic.BetaDreamStatusPending || len(d.Outputs) != 0 || d.JSON.SessionID.Raw() != "null" ||
		d.Model.ID != "scripted" || d.Model.Speed != "standard" || d.OutputBehavior.Type != "create_new" || d.Instructions != script ||
		len(d.Inputs) != 2 || d.Inputs[0].MemoryStoreID != k.store || !slices.Equal(d.Inputs[1].SessionIDs, sorted) ||
		d.JSON.Error.Raw() != "null" || d.JSON.EndedAt.Raw() != "null" || d.JSON.ArchivedAt.Raw() != "null" || d.Usage.InputTokens != 0 {
		t.Fatalf("created %s", d.RawJSON())
	}
	done := s.waitDream(t, d.ID, ended)
	if done.Status != anthropic.BetaDreamStatusCompleted || done.SessionID == "" || len(done.Outputs) != 1 || done.Outputs[0].Type != "memory_store" ||
		done.Outputs[0].MemoryStoreID == k.store || done.EndedAt.IsZero() || done.JSON.Error.Raw() != "null" {
		t.Fatalf("dream %s", done.RawJSON())
	}
	out, err := s.client.Beta.MemoryStores.Get(ctx, done.Outputs[0].MemoryStoreID, anthropic.BetaMemoryStoreGetParams{})
	if err != nil || out.Name != "Team Notes (dream "+d.ID+")" || out.Description != "what the team knows" {
		t.Fatalf("output store %+v, %v", out, err)
	}
	// The copy, then the dream agent's writes through its mount, by its
	// session.
	want := []string{"/facts/db.md " + sha256Hex("postgres 16"), "/insights/dreams.md " + sha256Hex("dreams run as sessions\n"),
		"/prefs/editor.md " + sha256Hex("neovim\n")}
	if got := s.memorySnapshot(t, out.ID); !slices.Equal(got, want) {
		t.Fatalf("output memories %v, want %v (the input's were %v)", got, want, memories)
	}
	var bySession []string
	for it := s.client.Beta.MemoryStores.MemoryVersions.ListAutoPaging(ctx, out.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{}); it.Next(); {
		v := it.Current()
		switch v.CreatedBy.Type {
		case "session_actor":
			if v.CreatedBy.SessionID != done.SessionID {
				t.Fatalf("version %s by session %s, not the dream's", v.ID, v.CreatedBy.SessionID)
			}
			bySession = append(bySession, string(v.Operation)+" "+v.Path)
		case "api_actor":
			if v.Operation != "created" {
				t.Fatalf("copy version %s", v.RawJSON())
			}
		default:
			t.Fatalf("version %s", v.RawJSON())
		}
	}
	slices.Sort(bySession)
	if wantOps := []string{"created /insights/dreams.md", "deleted /todo.md", "modified /prefs/editor.md"}; !slices.Equal(bySession, wantOps) {
		t.Fatalf("the dream's versions %v, want %v", bySession, wantOps)
	}
	if got := s.memorySnapshot(t, k.store); !slices.Equal(got, memories) {
		t.Fatalf("input memories changed: %v, were %v", got, memories)
	}
	if got := s.versionSnapshot(t, k.store); !slices.Equal(got, versions) {
		t.Fatalf("input versions changed: %v, were %v", got, versions)
	}

	// The dream's session: the dream agent, the dreams environment, the
	// output store and the transcripts.
	sess, err := s.client.Beta.Sessions.Get(ctx, done.SessionID, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Agent.ID != "agent_reins_dream" || sess.Agent.Model.ID != "scripted" || !strings.Contains(sess.Agent.System, "dream agent") ||
		sess.Status != "idle" || sess.Usage.InputTokens != done.Usage.InputTokens || sess.Usage.OutputTokens != done.Usage.OutputTokens {
		t.Fatalf("dream session %s\ndream usage %s", sess.RawJSON(), done.Usage.RawJSON())
	}
	if len(sess.Resources) != 3 || sess.Resources[0].Type != "memory_store" || sess.Resources[0].MemoryStoreID != out.ID ||
		sess.Resources[0].Access != "read_write" || !strings.HasPrefix(sess.Resources[0].MountPath, "/mnt/memory/team-notes-dream-drm-") {
		t.Fatalf("dream session resources %s", sess.RawJSON())
	}
	for i, id := range sorted {
		if r := sess.Resources[i+1]; r.Type != "file" || r.MountPath != "/workspace/transcripts/"+id+".md" {
			t.Fatalf("transcript resource %d: %s", i, r.RawJSON())
		}
	}
	env, err := s.client.Beta.Environments.Get(ctx, sess.EnvironmentID, anthropic.BetaEnvironmentGetParams{})
	if err != nil || env.Config.Networking.Type != "limited" || len(env.Config.Networking.AllowedHosts) != 0 {
		t.Fatalf("dreams environment %s, %v", env.RawJSON(), err)
	}
	var first, result string
	for _, ev := range s.listAll(t, done.SessionID) {
		switch {
		case ev.Type == ma.EventUserMessage && first == "":
			first = ev.Content[0].Text
		case ev.Type == ma.EventAgentToolResult:
			result = ev.Content[0].Text
		}
	}
	if !strings.Contains(first, "Instructions from the person who started this dream:\n"+script) || !strings.Contains(first, out.Name) {
		t.Fatalf("first message %q", first)
	}
	for _, id := range sorted {
		if !strings.Contains(result, id+".md") || !strings.Contains(result, "# Session "+id) {
			t.Fatalf("the dream agent's bash saw %q, want the transcript of %s", result, id)
		}
	}
	if !strings.Contains(result, "/mnt/memory/team-notes-dream-drm-") {
		t.Fatalf("the dream agent's bash was not in its mount: %q", result)
	}
	if !strings.Contains(result, "2\n2") {
		t.Fatalf("each transcript should hold its session's message once, and the echo of it: %q", result)
	}
}

// TestDreamsLifecycle: with the official Go SDK, an update_existing dream
// runs (its session streams as any session's); while it runs, another
// update_existing dream on the store is refused with 409 conflict_error
// (x-should-retry: false, naming the running one), a create_new dream on
// it is not, and archiving it is refused. Canceling it cancels it (again:
// unchanged) and stops its session; then the second update_existing
// dream runs, writes the input store in place (a version by its
// session) and completes with the input store as its output. A
// completed dream cannot be canceled; a dream whose model fails fails
// with the session's error; archiving an ended dream archives it (again:
// unchanged). The list is newest first, leaves archived dreams out unless
// asked, filters by statuses and exclusive created_at bounds, and pages.
func TestDreamsLifecycle(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	k := newDreamKit(t, s)
	update := anthropic.BetaOutputBehaviorParamOfUpdateExisting(k.store)
	versions := s.versionSnapshot(t, k.store)
	c := s.client.Beta.Dreams

	long, err := c.New(ctx, k.params("@sleep 60s", update))
	if err != nil {
		t.Fatal(err)
	}
	running := s.waitDream(t, long.ID, func(d *anthropic.BetaDream) bool { return d.Status == anthropic.BetaDreamStatusRunning })
	if running.SessionID == "" || len(running.Outputs) != 1 || running.Outputs[0].MemoryStoreID != k.store || running.OutputBehavior.MemoryStoreID != k.store {
		t.Fatalf("running %s", running.RawJSON())
	}
	st := s.openStream(t, running.SessionID)
	_, err = c.Archive(ctx, long.ID, anthropic.BetaDreamArchiveParams{})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	_, err = c.New(ctx, k.params("@text second", update))
	apiErr(t, err, http.StatusConflict, "conflict_error")
	var ae *anthropic.Error
	if errors.As(err, &ae); ae.Response.Header.Get("x-should-retry") != "false" || !strings.Contains(ae.RawJSON(), long.ID) {
		t.Fatalf("409 %s (x-should-retry %q), want it to name %s", ae.RawJSON(), ae.Response.Header.Get("x-should-retry"), long.ID)
	}
	copied, err := c.New(ctx, k.params("@text copied", anthropic.BetaOutputBehaviorUnionParam{}))
	if err != nil {
		t.Fatalf("a create_new dream beside a running update_existing one: %v", err)
	}

	canceled, err := c.Cancel(ctx, long.ID, anthropic.BetaDreamCancelParams{})
	if err != nil || canceled.Status != anthropic.BetaDreamStatusCanceled || canceled.EndedAt.IsZero() {
		t.Fatalf("cancel = %v, %v", canceled, err)
	}
	again, err := c.Cancel(ctx, long.ID, anthropic.BetaDreamCancelParams{})
	if err != nil || again.Status != anthropic.BetaDreamStatusCanceled || !again.EndedAt.Equal(canceled.EndedAt) {
		t.Fatalf("cancel again = %v, %v", again, err)
	}
	st.until(isIdle) // the dream's session stops
	st.cancel()

	// Once the canceled dream's session stopped, the store is free.
	var second *anthropic.BetaDream
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if second, err = c.New(ctx, k.params(`@tool bash {"command":"cd /mnt/memory/*/ && echo 'postgres 17' > facts/db.md"}`+"\n@then updated", update)); err == nil || time.Now().After(deadline) {
			break
		}
		apiErr(t, err, http.StatusConflict, "conflict_error")
	}
	if err != nil {
		t.Fatalf("second update_existing dream after the first stopped: %v", err)
	}
	second = s.waitDream(t, second.ID, ended)
	if second.Status != anthropic.BetaDreamStatusCompleted || len(second.Outputs) != 1 || second.Outputs[0].MemoryStoreID != k.store {
		t.Fatalf("second %s", second.RawJSON())
	}
	// The dream wrote in place: one new version, by its session; the
	// store's earlier versions are as they were.
	got := s.versionSnapshot(t, k.store)
	if len(got) != len(versions)+1 || !slices.Equal(got[1:], versions) || !strings.HasSuffix(got[0], " modified /facts/db.md") {
		t.Fatalf("versions %v, were %v", got, versions)
	}
	db, err := s.client.Beta.MemoryStores.MemoryVersions.Get(ctx, strings.Fields(got[0])[0], anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: k.store})
	if err != nil || db.Content != "postgres 17\n" || db.CreatedBy.Type != "session_actor" || db.CreatedBy.SessionID != second.SessionID {
		t.Fatalf("the dream's version %v, %v", db, err)
	}
	_, err = c.Cancel(ctx, second.ID, anthropic.BetaDreamCancelParams{})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")

	failed, err := c.New(ctx, k.params("@fail invalid", anthropic.BetaOutputBehaviorUnionParam{}))
	if err != nil {
		t.Fatal(err)
	}
	failed = s.waitDream(t, failed.ID, ended)
	if failed.Status != anthropic.BetaDreamStatusFailed || failed.Error.Type == "" || failed.Error.Message == "" || failed.EndedAt.IsZero() {
		t.Fatalf("failed %s", failed.RawJSON())
	}
	copied = s.waitDream(t, copied.ID, ended)
	if copied.Status != anthropic.BetaDreamStatusCompleted {
		t.Fatalf("copied %s", copied.RawJSON())
	}

	archived, err := c.Archive(ctx, long.ID, anthropic.BetaDreamArchiveParams{})
	if err != nil || archived.ArchivedAt.IsZero() || archived.Status != anthropic.BetaDreamStatusCanceled {
		t.Fatalf("archive = %v, %v", archived, err)
	}
	if again, err := c.Archive(ctx, long.ID, anthropic.BetaDreamArchiveParams{}); err != nil || !again.ArchivedAt.Equal(archived.ArchivedAt) {
		t.Fatalf("archive again = %v, %v", again, err)
	}
	if got, err := c.Get(ctx, long.ID, anthropic.BetaDreamGetParams{}); err != nil || got.ArchivedAt.IsZero() {
		t.Fatalf("get archived = %v, %v", got, err)
	}

	list := func(p anthropic.BetaDreamListParams) []string {
		t.Helper()
		page, err := c.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range page.Data {
			out = append(out, d.ID)
		}
		return out
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", name, got, want)
		}
	}
	// Created in the order long, copied, second, failed.
	check("default", list(anthropic.BetaDreamListParams{}), failed.ID, second.ID, copied.ID)
	check("include_archived", list(anthropic.BetaDreamListParams{IncludeArchived: anthropic.Bool(true)}), failed.ID, second.ID, copied.ID, long.ID)
	check("canceled", list(anthropic.BetaDreamListParams{IncludeArchived: anthropic.Bool(true), Statuses: []anthropic.BetaDreamStatus{"canceled"}}), long.ID)
	check("completed or failed", list(anthropic.BetaDreamListParams{Statuses: []anthropic.BetaDreamStatus{"completed", "failed"}}), failed.ID, second.ID, copied.ID)
	check("created_at in (copied, failed)", list(anthropic.BetaDreamListParams{CreatedAtGt: anthropic.Time(copied.CreatedAt), CreatedAtLt: anthropic.Time(failed.CreatedAt)}), second.ID)
	page, err := c.List(ctx, anthropic.BetaDreamListParams{Limit: anthropic.Int(2)})
	if err != nil || len(page.Data) != 2 || page.NextPage == "" {
		t.Fatalf("first page %v, %v", page, err)
	}
	check("second page", list(anthropic.BetaDreamListParams{Limit: anthropic.Int(2), Page: anthropic.String(page.NextPage)}), copied.ID)
	var all []string
	for it := c.ListAutoPaging(ctx, anthropic.BetaDreamListParams{Limit: anthropic.Int(1), IncludeArchived: anthropic.Bool(true)}); it.Next(); {
		all = append(all, it.Current().ID)
	}
	check("auto-paging", all, failed.ID, second.ID, copied.ID, long.ID)
}

// TestDreamValidation: every malformed, unsupported or unknown part of a
// create request is a 400 (a missing store or session, or another
// workspace's, a 404), as is a request without the dreams beta header,
// an unknown list parameter or status, and a limit out of range; a
// read_only key cannot create a dream (403); an unknown dream is a 404.
func TestDreamValidation(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	ms, err := s.client.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "checked"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.client.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.client.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "archived"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Beta.MemoryStores.Archive(ctx, gone.ID, anthropic.BetaMemoryStoreArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	sess := s.newSession(t, a.ID, env.ID).ID
	store := map[string]any{"type": "memory_store", "memory_store_id": ms.ID}
	sessions := map[string]any{"type": "sessions", "session_ids": []string{sess}}
	valid := func() map[string]any {
		return map[string]any{"inputs": []any{store, sessions}, "model": "scripted"}
	}
	post := func(body map[string]any) (int, string) {
		t.Helper()
		st, err := callWith(s.url, "POST", "/v1/dreams", body, nil, func(h map[string]string) {
			h["x-api-key"], h["anthropic-beta"] = s.key, "dreaming-2026-04-21"
		})
		if err == nil {
			return st, ""
		}
		return st, err.Error()
	}
	with := func(k string, v any) map[string]any {
		b := valid()
		b[k] = v
		return b
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("sesn_%d", i)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		says   string
	}{
		{"no inputs", map[string]any{"model": "scripted"}, 400, "inputs"},
		{"no model", map[string]any{"inputs": []any{store, sessions}}, 400, "model: required"},
		{"two stores", with("inputs", []any{store, store, sessions}), 400, "exactly one"},
		{"no sessions input", with("inputs", []any{store}), 400, "exactly one"},
		{"unknown input type", with("inputs", []any{store, sessions, map[string]any{"type": "files"}}), 400, "inputs[2].type"},
		{"unknown input field", with("inputs", []any{map[string]any{"type": "memory_store", "memory_store_id": ms.ID, "access": "read_only"}, sessions}), 400, "inputs[0].access"},
		{"store input with sessions", with("inputs", []any{map[string]any{"type": "memory_store", "memory_store_id": ms.ID, "session_ids": []string{sess}}, sessions}), 400, "inputs[0]"},
		{"no session ids", with("inputs", []any{store, map[string]any{"type": "sessions", "session_ids": []string{}}}), 400, "1 to 100"},
		{"101 sessions", with("inputs", []any{store, map[string]any{"type": "sessions", "session_ids": many}}), 400, "1 to 100"},
		{"duplicate session", with("inputs", []any{store, map[string]any{"type": "sessions", "session_ids": []string{sess, sess}}}), 400, "twice"},
		{"missing session", with("inputs", []any{store, map[string]any{"type": "sessions", "session_ids": []string{sess, "sesn_missing"}}}), 404, "sesn_missing"},
		{"missing store", with("inputs", []any{map[string]any{"type": "memory_store", "memory_store_id": "memstore_missing"}, sessions}), 404, "memstore_missing"},
		{"archived store", with("inputs", []any{map[string]any{"type": "memory_store", "memory_store_id": gone.ID}, sessions}), 400, "archived"},
		{"fast model", with("model", map[string]any{"id": "scripted", "speed": "fast"}), 400, "standard"},
		{"unknown model field", with("model", map[string]any{"id": "scripted", "effort": "high"}), 400, "model.effort"},
		{"unserved model", with("model", "no-such-provider-model"), 400, "model"},
		{"empty instructions", with("instructions", ""), 400, "instructions"},
		{"long instructions", with("instructions", strings.Repeat("x", 4097)), 400, "instructions"},
		{"update another store", with("output_behavior", map[string]any{"type": "update_existing", "memory_store_id": other.ID}), 400, "output_behavior.memory_store_id"},
		{"update without store", with("output_behavior", map[string]any{"type": "update_existing"}), 400, "required"},
		{"create_new with store", with("output_behavior", map[string]any{"type": "create_new", "memory_store_id": ms.ID}), 400, "output_behavior.memory_store_id"},
		{"unknown behavior", with("output_behavior", map[string]any{"type": "merge"}), 400, "output_behavior.type"},
		{"unknown field", with("metadata", map[string]string{"a": "b"}), 400, "metadata"},
	} {
		if st, msg := post(tc.body); st != tc.status || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, st, msg, tc.status, tc.says)
		}
	}
	if st, msg := post(with("model", map[string]any{"id": "scripted", "speed": "standard"})); st != 200 {
		t.Fatalf("a valid dream: %d %s", st, msg)
	}
	if st, err := call(s.url, s.key, "POST", "/v1/dreams", valid(), nil); st != 400 || !strings.Contains(err.Error(), "dreaming-2026-04-21") {
		t.Fatalf("without the beta header: %d %v", st, err)
	}
	// Another workspace's session and store are not found; a read_only
	// key cannot create a dream, nor see the default workspace's.
	w, err := s.client.Organization.Workspaces.New(ctx, anthropic.OrganizationWorkspaceNewParams{Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	dev := s.developer(t, w.ID, "dreamer", "developer")
	dev.makeAll(t, s)
	params := anthropic.BetaDreamNewParams{Inputs: []anthropic.BetaDreamInputUnionParam{anthropic.BetaDreamInputParamOfMemoryStore(ms.ID),
		anthropic.BetaDreamInputParamOfSessions([]string{dev.session})}, Model: anthropic.BetaDreamNewParamsModelUnion{OfString: anthropic.String("scripted")}}
	_, err = s.client.Beta.Dreams.New(ctx, params)
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = dev.client.Beta.Dreams.New(ctx, params)
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	reader := s.developer(t, w.ID, "reader", "read_only")
	_, err = reader.client.Beta.Dreams.New(ctx, params)
	apiErr(t, err, http.StatusForbidden, "permission_error")
	if page, err := reader.client.Beta.Dreams.List(ctx, anthropic.BetaDreamListParams{}); err != nil || len(page.Data) != 0 {
		t.Fatalf("another workspace lists %v, %v", page, err)
	}

	c := s.client.Beta.Dreams
	_, err = c.Get(ctx, "drm_missing", anthropic.BetaDreamGetParams{})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = c.List(ctx, anthropic.BetaDreamListParams{Statuses: []anthropic.BetaDreamStatus{"sleeping"}})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	_, err = c.List(ctx, anthropic.BetaDreamListParams{Limit: anthropic.Int(101)})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	for _, q := range []string{"?order=asc", "?created_at[gte]=2026-01-01T00:00:00Z", "?page=bogus"} {
		if st, err := callWith(s.url, "GET", "/v1/dreams"+q, nil, nil, func(h map[string]string) {
			h["x-api-key"], h["anthropic-beta"] = s.key, "dreaming-2026-04-21"
		}); st != 400 {
			t.Errorf("list%s: %d %v, want 400", q, st, err)
		}
	}
}

// TestDreamResumesAfterRestart: a running dream whose server stops
// completes after the restart, in the same session; a pending dream whose
// start was cut off (its copy store made, with a memory the copy did not
// finish, and a transcript file left) starts again from its plan: the
// copy is made anew, exactly the input's memories, and the leftover file
// is gone.
func TestDreamResumesAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startStoppable(t, options{dir: dir}, nil)
	k := newDreamKit(t, s)
	memories := s.memorySnapshot(t, k.store)
	a, err := s.client.Beta.Dreams.New(ctx, k.params("@sleep 1s\n@text dreamt", anthropic.BetaOutputBehaviorUnionParam{}))
	if err != nil {
		t.Fatal(err)
	}
	running := s.waitDream(t, a.ID, func(d *anthropic.BetaDream) bool { return d.Status == anthropic.BetaDreamStatusRunning })
	stop()

	b, leftover := cutOffDream(t, dir, k)
	s2 := startWith(t, options{dir: dir}, nil)
	done := s2.waitDream(t, a.ID, ended)
	if done.Status != anthropic.BetaDreamStatusCompleted || done.SessionID != running.SessionID {
		t.Fatalf("running dream after the restart: %s (was %s)", done.RawJSON(), running.RawJSON())
	}
	resumed := s2.waitDream(t, b.ID, ended)
	if resumed.Status != anthropic.BetaDreamStatusCompleted || resumed.SessionID != b.Plan.SessionID || len(resumed.Outputs) != 1 ||
		resumed.Outputs[0].MemoryStoreID != b.Plan.StoreID {
		t.Fatalf("cut-off dream after the restart: %s", resumed.RawJSON())
	}
	if got := s2.memorySnapshot(t, b.Plan.StoreID); !slices.Equal(got, memories) {
		t.Fatalf("the copy after the restart: %v, want %v", got, memories)
	}
	files, err := s2.client.Beta.Files.List(ctx, anthropic.BetaFileListParams{ScopeID: anthropic.String(b.Plan.SessionID)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files.Data {
		if f.ID == leftover {
			t.Fatalf("the leftover transcript %s is still there", leftover)
		}
		names = append(names, f.Filename)
	}
	if len(names) != 2 {
		t.Fatalf("transcripts of the resumed dream: %v", names)
	}
}

// cutOffDream writes, in the stopped server's database in dir, a
// pending dream over k whose start was cut off: its copy store exists
// with one memory, and a transcript file of its session. It returns the
// dream and the file's id.
func cutOffDream(t *testing.T, dir string, k *dreamKit) (store.Dream, string) {
	t.Helper()
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	st, err := sqlite.Open(ctx, filepath.Join(dir, app.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	d := store.Dream{Dream: ma.Dream{ID: ids.New(ids.Dream), Type: "dream", Status: ma.DreamPending,
		Inputs:  []ma.DreamInput{{Type: ma.DreamInputMemoryStore, MemoryStoreID: k.store}, {Type: ma.DreamInputSessions, SessionIDs: k.sessions}},
		Outputs: []ma.DreamOutput{}, Model: ma.DreamModel{ID: "scripted", Speed: "standard"}, Instructions: ptrTo("@text resumed"),
		OutputBehavior: ma.DreamOutputBehavior{Type: ma.DreamCreateNew}, CreatedAt: ma.Time(now)},
		Active: true, Plan: store.DreamPlan{SessionID: ids.New(ids.Session), StoreID: ids.New(ids.MemoryStore)}}
	if err := st.CreateDream(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateMemoryStore(ctx, ma.MemoryStore{ID: d.Plan.StoreID, Type: "memory_store", Name: "half a copy", Metadata: ma.Metadata{},
		CreatedAt: ma.Time(now), UpdatedAt: ma.Time(now)}); err != nil {
		t.Fatal(err)
	}
	path, content := "/leftover.md", "from the cut-off start"
	if _, err := st.CreateMemory(ctx, store.MemoryWrite{StoreID: d.Plan.StoreID, MemoryID: ids.New(ids.Memory), VersionID: ids.New(ids.MemoryVersion),
		Path: &path, Content: &content, At: now}); err != nil {
		t.Fatal(err)
	}
	f := store.File{File: ma.File{ID: ids.New(ids.File), Type: "file", Filename: "old.md", MimeType: "text/markdown", SizeBytes: 3,
		CreatedAt: ma.Time(now), Downloadable: true, Scope: &ma.FileScope{ID: d.Plan.SessionID, Type: "session"}}, SHA256: sha256Hex("old")}
	if err := st.CreateFile(ctx, f, strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	return d, f.ID
}

func ptrTo[T any](v T) *T { return &v }
