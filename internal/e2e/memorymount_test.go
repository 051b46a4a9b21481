package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// toolResult runs one bash command through the scripted model and returns
// the tool result's text and whether it is an error.
func (s *server) toolResult(t *testing.T, sessionID, command string) (string, bool) {
	t.Helper()
	st := s.openStream(t, sessionID)
	defer st.cancel()
	s.send(t, sessionID, userMessage(fmt.Sprintf(`@tool bash {"command":%q}`+"\n@then done", command)))
	var out strings.Builder
	isError := false
	for _, ev := range st.untilWithin(isIdle, time.Minute) {
		if ev.Type == "agent.tool_result" {
			for _, b := range ev.Content {
				out.WriteString(b.Text)
			}
			isError = isError || (ev.IsError != nil && *ev.IsError)
		}
	}
	return out.String(), isError
}

// TestMemoryMountsShared: with the official Go SDK, cloud sessions that
// share a memory store see it as files under /mnt/memory/<slug>: what one
// writes with bash the other reads at its next tool call, and the
// version list shows both sessions as actors; a change over the API
// reaches a session's files; a read_only mount refuses a write at the
// file system; a file over 100 kB is a clear tool error and is not saved;
// writes elsewhere under /mnt/memory stay in the sandbox.
func TestMemoryMountsShared(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	c := s.client.Beta.MemoryStores
	ms, err := c.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "Team Notes"})
	if err != nil {
		t.Fatal(err)
	}
	readme, err := c.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/readme.md", Content: anthropic.String("house rules\n")})
	if err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	newSession := func(access string) string {
		sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID,
			Resources: []anthropic.BetaSessionNewParamsResourceUnion{memoryResource(ms.ID, access, "")}})
		if err != nil {
			t.Fatal(err)
		}
		if sess.Resources[0].MountPath != "/mnt/memory/team-notes" {
			t.Fatalf("mount path %s", sess.Resources[0].MountPath)
		}
		return sess.ID
	}
	one, two, reader := newSession("read_write"), newSession("read_write"), newSession("read_only")
	run := func(sessionID, cmd string) string {
		t.Helper()
		out, isErr := s.toolResult(t, sessionID, cmd)
		if isErr {
			t.Fatalf("%s: tool error: %s", cmd, out)
		}
		return out
	}

	if out := run(one, "cd /mnt/memory/team-notes && cat readme.md && echo 'from one' > notes.md && echo scratch > ../scratch.txt"); !strings.Contains(out, "house rules") {
		t.Fatalf("session one read %q", out)
	}
	if out := run(two, "cd /mnt/memory/team-notes && cat notes.md && echo 'from two' >> notes.md; ls /mnt/memory"); !strings.Contains(out, "from one") || strings.Contains(out, "scratch") {
		t.Fatalf("session two read %q", out)
	}
	if out := run(one, "cat /mnt/memory/team-notes/notes.md"); !strings.Contains(out, "from one\nfrom two") {
		t.Fatalf("session one reads back %q", out)
	}
	if _, err := c.Memories.Update(ctx, readme.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Content: anthropic.String("new rules\n")}); err != nil {
		t.Fatal(err)
	}
	if out := run(two, "cat /mnt/memory/team-notes/readme.md"); !strings.Contains(out, "new rules") {
		t.Fatalf("an API change did not reach session two: %q", out)
	}

	vs, err := c.MemoryVersions.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var actors []string
	for _, v := range vs.Data {
		actors = append(actors, string(v.Operation)+" "+string(v.CreatedBy.Type)+" "+v.CreatedBy.SessionID)
	}
	for _, want := range []string{"created session_actor " + one, "modified session_actor " + two, "created api_actor ", "modified api_actor "} {
		if !slices.Contains(actors, want) {
			t.Errorf("versions %q lack %q", actors, want)
		}
	}
	if len(vs.Data) != 4 {
		t.Errorf("%d versions, want 4: %q", len(vs.Data), actors)
	}

	out, _ := s.toolResult(t, reader, "cat /mnt/memory/team-notes/notes.md; echo x > /mnt/memory/team-notes/x.md")
	if !strings.Contains(out, "from two") || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("read_only session: %q", out)
	}
	out, isErr := s.toolResult(t, one, "head -c 103424 /dev/zero | tr '\\0' x > /mnt/memory/team-notes/big.md; echo written")
	if !isErr || !strings.Contains(out, "written") || !strings.Contains(out, "/mnt/memory/team-notes/big.md was not saved to the memory store: it is over the limit of a memory") {
		t.Fatalf("a 101 kB memory: error=%v %q", isErr, out)
	}
	if got := s.memoryPaths(t, ms.ID); got != "/notes.md,/readme.md" {
		t.Fatalf("store holds %s", got)
	}
}

// memoryPaths lists the paths of a store's memories, comma-separated.
func (s *server) memoryPaths(t *testing.T, storeID string) string {
	t.Helper()
	list, err := s.client.Beta.MemoryStores.Memories.List(context.Background(), storeID, anthropic.BetaMemoryStoreMemoryListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range list.Data {
		paths = append(paths, m.Path)
	}
	return strings.Join(paths, ",")
}
