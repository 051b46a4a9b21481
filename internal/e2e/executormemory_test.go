package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestExecutorMemory: a self-hosted session on an executor with the
// built-in sandboxed toolset (what `reins executor` runs) sees its memory
// store under /mnt/memory/<slug>: the agent's write with bash reaches the
// store as a version by the session, a change over the API reaches the
// executor's files at the next tool call, and a file over 100 kB is a
// clear tool error.
func TestExecutorMemory(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	envID, key := s.selfHosted(t, "hands")
	startExecutorClient(t, s.url, key, "hands")
	c := s.client.Beta.MemoryStores
	ms, err := c.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "Hands Notes"})
	if err != nil {
		t.Fatal(err)
	}
	readme, err := c.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/readme.md", Content: anthropic.String("from the server\n")})
	if err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted", toolset(false))
	sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: envID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{memoryResource(ms.ID, "", "")}})
	if err != nil {
		t.Fatal(err)
	}
	out, isErr := s.toolResult(t, sess.ID, "cat /mnt/memory/hands-notes/readme.md && echo learned > /mnt/memory/hands-notes/lesson.md")
	if isErr || !strings.Contains(out, "from the server") {
		t.Fatalf("first call: error=%v %q", isErr, out)
	}
	list, err := c.Memories.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryListParams{})
	if err != nil || len(list.Data) != 2 || list.Data[0].Path != "/lesson.md" {
		t.Fatalf("store after the write: %v %v", list, err)
	}
	vs, err := c.MemoryVersions.List(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(list.Data[0].ID)})
	if err != nil || len(vs.Data) != 1 || string(vs.Data[0].CreatedBy.Type) != "session_actor" || vs.Data[0].CreatedBy.SessionID != sess.ID {
		t.Fatalf("the write's version: %v %v", vs, err)
	}
	if _, err := c.Memories.Update(ctx, readme.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ms.ID, Content: anthropic.String("changed over the API\n")}); err != nil {
		t.Fatal(err)
	}
	if out, isErr := s.toolResult(t, sess.ID, "cat /mnt/memory/hands-notes/readme.md"); isErr || !strings.Contains(out, "changed over the API") {
		t.Fatalf("after the API change: error=%v %q", isErr, out)
	}
	out, isErr = s.toolResult(t, sess.ID, "head -c 103424 /dev/zero | tr '\\0' x > /mnt/memory/hands-notes/big.md")
	if !isErr || !strings.Contains(out, "big.md was not saved to the memory store") {
		t.Fatalf("a 101 kB memory: error=%v %q", isErr, out)
	}
}
