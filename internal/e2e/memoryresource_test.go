package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
)

// memoryResource is a memory_store resource param.
func memoryResource(id, access, instructions string) anthropic.BetaSessionNewParamsResourceUnion {
	p := &anthropic.BetaManagedAgentsMemoryStoreResourceParam{MemoryStoreID: id,
		Access: anthropic.BetaManagedAgentsMemoryStoreResourceParamAccess(access)}
	if instructions != "" {
		p.Instructions = anthropic.String(instructions)
	}
	return anthropic.BetaSessionNewParamsResourceUnion{OfMemoryStore: p}
}

// TestMemoryStoreSessionResource: with the official Go SDK, a session is
// created with two memory stores (one read_only with instructions); the
// response shows each mount under /mnt/memory with a snapshot of the
// store's name and description; the sessions list filters by store; the
// model's system prompt names each mount, its access, description and
// instructions. An archived or unknown store, a ninth store, long
// instructions, a mount_path and adding a store later are refused.
func TestMemoryStoreSessionResource(t *testing.T) {
	s, fake := startWithFakeAnthropic(t)
	ctx := context.Background()
	c := s.client.Beta.MemoryStores
	newStore := func(name, desc string) string {
		t.Helper()
		ms, err := c.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: name, Description: anthropic.String(desc)})
		if err != nil {
			t.Fatal(err)
		}
		return ms.ID
	}
	prefs := newStore("User Preferences", "what the user likes")
	team := newStore("Team notes!", "")
	twin := newStore("user preferences", "same slug")
	a, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "memory", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: provider.DefaultModel},
		System: anthropic.String("You are careful."), Tools: []anthropic.BetaAgentNewParamsToolUnion{toolset(false)}})
	if err != nil {
		t.Fatal(err)
	}
	env := s.newEnv(t, "env")
	create := func(res ...anthropic.BetaSessionNewParamsResourceUnion) (*anthropic.BetaManagedAgentsSession, error) {
		return s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID, Resources: res})
	}
	sess, err := create(memoryResource(prefs, "", ""), memoryResource(team, "read_only", "Only read the style guide."), memoryResource(twin, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(sess.Resources) != 3 {
		t.Fatalf("resources %s", sess.RawJSON())
	}
	r0, r1, r2 := sess.Resources[0], sess.Resources[1], sess.Resources[2]
	if r0.Type != "memory_store" || r0.MemoryStoreID != prefs || r0.MountPath != "/mnt/memory/user-preferences" || r0.Access != "read_write" ||
		r0.Name != "User Preferences" || r0.Description != "what the user likes" || r0.JSON.Instructions.Raw() != "null" || r0.JSON.ID.Valid() {
		t.Fatalf("first resource %s", r0.RawJSON())
	}
	if r1.MountPath != "/mnt/memory/team-notes" || r1.Access != "read_only" || r1.Instructions != "Only read the style guide." || r1.JSON.Description.Raw() != `""` {
		t.Fatalf("second resource %s", r1.RawJSON())
	}
	if r2.MountPath != "/mnt/memory/user-preferences-2" {
		t.Fatalf("a store whose name has a taken slug is mounted at %s", r2.MountPath)
	}
	// A later rename does not change the session's snapshot.
	if _, err := c.Update(ctx, prefs, anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String("Renamed")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil || got.Resources[0].Name != "User Preferences" {
		t.Fatalf("session after the rename: %v %v", got.Resources[0].RawJSON(), err)
	}
	// Adding and removing a file resource keeps the memory stores as
	// they were, and the resources list shows them.
	f, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("x"), "x.txt", "text/plain")})
	if err != nil {
		t.Fatal(err)
	}
	added, err := s.client.Beta.Sessions.Resources.Add(ctx, sess.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{FileID: f.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Beta.Sessions.Resources.Delete(ctx, added.ID, anthropic.BetaSessionResourceDeleteParams{SessionID: sess.ID}); err != nil {
		t.Fatal(err)
	}
	listed, err := s.client.Beta.Sessions.Resources.List(ctx, sess.ID, anthropic.BetaSessionResourceListParams{})
	if err != nil || len(listed.Data) != 3 || listed.Data[1].RawJSON() != r1.RawJSON() {
		t.Fatalf("resources after a file came and went: %+v, %v; want %s second", listed.Data, err, r1.RawJSON())
	}
	other := s.newSession(t, a.ID, env.ID)
	list, err := s.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{MemoryStoreID: anthropic.String(team)})
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != sess.ID {
		t.Fatalf("sessions with %s: %+v, %v (other session %s)", team, list.Data, err, other.ID)
	}

	// The model sees the mounts in its system prompt.
	fake.Push(fakeanthropic.Text("noted"))
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("remember that I like tea"))
	st.until(isIdle)
	reqs := fake.Requests()
	system := systemPrompt(t, reqs[len(reqs)-1].Body)
	for _, want := range []string{"You are careful.", "<name>User Preferences</name>", "<mount_path>/mnt/memory/user-preferences</mount_path>",
		"<access>read_write</access>", "<description>what the user likes</description>", "<mount_path>/mnt/memory/team-notes</mount_path>",
		"<access>read_only</access>", "<instructions>Only read the style guide.</instructions>", "/mnt/memory/user-preferences-2"} {
		if !strings.Contains(system, want) {
			t.Fatalf("system prompt lacks %q:\n%s", want, system)
		}
	}

	// Refusals.
	_, err = create(memoryResource("memstore_missing", "", ""))
	apiErr(t, err, 404, "not_found_error")
	_, err = create(memoryResource(prefs, "write_only", ""))
	apiErr(t, err, 400, "invalid_request_error")
	_, err = create(memoryResource(prefs, "", strings.Repeat("x", 4097)))
	apiErr(t, err, 400, "invalid_request_error")
	_, err = create(memoryResource(prefs, "", ""), memoryResource(prefs, "", ""))
	apiErr(t, err, 400, "invalid_request_error")
	var nine []anthropic.BetaSessionNewParamsResourceUnion
	for i := range 9 {
		nine = append(nine, memoryResource(newStore("store "+string(rune('a'+i)), ""), "", ""))
	}
	_, err = create(nine...)
	apiErr(t, err, 400, "invalid_request_error")
	if _, err := create(nine[:8]...); err != nil {
		t.Fatalf("8 memory stores: %v", err)
	}
	body := map[string]any{"agent": a.ID, "environment_id": env.ID, "resources": []map[string]any{{"type": "memory_store", "memory_store_id": prefs, "mount_path": "/mnt/memory/x"}}}
	if st, _ := call(s.url, s.key, "POST", "/v1/sessions", body, nil); st != 400 {
		t.Fatalf("a memory_store resource with a mount_path: %d, want 400", st)
	}
	if st, _ := call(s.url, s.key, "POST", "/v1/sessions/"+sess.ID+"/resources", map[string]any{"type": "memory_store", "memory_store_id": team}, nil); st != 400 {
		t.Fatalf("adding a memory store to a session: %d, want 400", st)
	}
	if _, err := c.Archive(ctx, team, anthropic.BetaMemoryStoreArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = create(memoryResource(team, "", ""))
	apiErr(t, err, 400, "invalid_request_error")
}
