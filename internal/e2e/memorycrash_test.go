package e2e

import (
	"strings"
	"testing"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// TestMemoryWriteSurvivesKill: the server is killed (SIGKILL) right after
// the tool call that wrote a memory under /mnt/memory; after the restart
// the session ends its turn, a later tool call of the session sees the
// file, and the store holds the memory with exactly one version, by the
// session.
func TestMemoryWriteSurvivesKill(t *testing.T) {
	k := startKillable(t, "sk-reins-memory-crash-key")
	agent, env := k.toolAgentInCloud()
	memCall := func(method, path string, body, out any) (int, error) {
		return callWith(k.url, method, path, body, out, func(h map[string]string) {
			h["x-api-key"], h["anthropic-beta"] = k.key, "agent-memory-2026-07-22"
		})
	}
	var ms ma.MemoryStore
	if _, err := memCall("POST", "/v1/memory_stores", map[string]any{"name": "notes"}, &ms); err != nil {
		t.Fatal(err)
	}
	var s ma.Session
	k.do("POST", "/v1/sessions", map[string]any{"agent": agent.ID, "environment_id": env.ID,
		"resources": []any{map[string]any{"type": "memory_store", "memory_store_id": ms.ID}}}, &s)
	say := func(text string) {
		t.Helper()
		k.do("POST", "/v1/sessions/"+s.ID+"/events", map[string]any{"events": []any{map[string]any{"type": "user.message",
			"content": []any{map[string]any{"type": "text", "text": text}}}}}, nil)
	}
	events := func(typ string) func() bool {
		return func() bool { return countEvents(t, k.url, k.key, s.ID, typ) >= 1 }
	}
	// The model answers the tool result slowly: the kill lands after the
	// result is recorded, before the turn ends.
	say(`@tool bash {"command":"echo learned > /mnt/memory/notes/lesson.md"}` + "\n@sleep 3s\n@then noted")
	until(t, 30*time.Second, "the tool result", events(ma.EventAgentToolResult))
	k.restart()
	until(t, 60*time.Second, "the turn's end", events(ma.EventStatusIdle))
	say(`@tool bash {"command":"cat /mnt/memory/notes/lesson.md"}` + "\n@then read")
	until(t, 60*time.Second, "the second turn", func() bool { return countEvents(t, k.url, k.key, s.ID, ma.EventStatusIdle) >= 2 })

	var evs struct{ Data []ma.Event }
	k.do("GET", "/v1/sessions/"+s.ID+"/events?limit=100", nil, &evs)
	var results []string
	for _, e := range evs.Data {
		if e.Type == ma.EventAgentToolResult {
			var b strings.Builder
			for _, blk := range e.Content {
				b.WriteString(blk.Text)
			}
			results = append(results, b.String())
		}
	}
	if len(results) != 2 || !strings.Contains(results[1], "learned") {
		t.Fatalf("tool results %q", results)
	}
	var vs struct{ Data []ma.MemoryVersion }
	if _, err := memCall("GET", "/v1/memory_stores/"+ms.ID+"/memory_versions", nil, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs.Data) != 1 || vs.Data[0].Operation != ma.MemoryCreated || vs.Data[0].CreatedBy == nil || vs.Data[0].CreatedBy.SessionID != s.ID ||
		vs.Data[0].Path == nil || *vs.Data[0].Path != "/lesson.md" {
		t.Fatalf("versions %+v", vs.Data)
	}
}

// countEvents counts a session's events of one type.
func countEvents(t *testing.T, url, key, sessionID, typ string) int {
	t.Helper()
	var evs struct{ Data []ma.Event }
	if _, err := call(url, key, "GET", "/v1/sessions/"+sessionID+"/events?limit=1000", nil, &evs); err != nil {
		return 0 // restarting
	}
	n := 0
	for _, e := range evs.Data {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// until polls cond every 10 ms until it holds, failing the test after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
