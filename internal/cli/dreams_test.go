package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// dreamInputs makes a memory store holding /prefs/editor.md and two
// finished sessions of the demo agent, and returns their ids.
func dreamInputs(t *testing.T, s *testServer) (store string, sessions []string) {
	t.Helper()
	ctx := context.Background()
	c := anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(s.key), option.WithMaxRetries(0))
	ms, err := c.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "Team Notes"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.MemoryStores.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/prefs/editor.md", Content: anthropic.String("vim")}); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"hello from session 1", "hello from session 2"} {
		r := s.run(t, "sessions", "run", "--agent", s.agentID, msg).must(t)
		id := regexp.MustCompile(`sesn_\w+`).FindString(r.stderr)
		if id == "" {
			t.Fatalf("no session id in %q", r.stderr)
		}
		sessions = append(sessions, id)
	}
	return ms.ID, sessions
}

// dreamField reads a field of `dreams get -o json`.
func dreamField(t *testing.T, s *testServer, id, field string) any {
	t.Helper()
	return jsonField(t, s.run(t, "dreams", "get", id, "-o", "json").must(t).stdout, field)
}

// TestDreamsCLI drives `reins dreams` over a real server with the scripted
// model: create (instructions from @file script the dream agent) prints the
// pending dream; watch renders the dream session's tool call and reply and
// ends with the output store; get, list (status filters, archived ones
// only when asked, the API's message for an unknown status), cancel of a
// completed dream refused with the API's message, archive. A second dream
// (--update-existing, "@@" for a leading @) sleeps: archive is refused while it
// runs, watch shows it running and ends with exit status 1 when it is
// canceled. watch -o json writes one JSON object a line, the dream last. A
// dream whose model fails ends watch with exit status 1 and its error.
func TestDreamsCLI(t *testing.T) {
	s := startServer(t)
	store, sessions := dreamInputs(t, s)
	script := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(script, []byte(`@tool bash {"command":"cd /mnt/memory/*/ && echo neovim > prefs/editor.md && cat prefs/editor.md"}`+"\n@then dreamt\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := s.run(t, "dreams", "create", "--store", store, "--session", sessions[0], "--session", sessions[1], "--model", "scripted", "--instructions", "@"+script).must(t)
	assertContains(t, r.stdout, "status:", "pending", "memory store:", store, sessions[0], sessions[1], "output behavior: create_new", "model:", "scripted (standard)", "@tool bash")
	id := regexp.MustCompile(`drm_\w+`).FindString(r.stdout)
	assertContains(t, r.stderr, "reins dreams watch "+id)

	r = s.run(t, "dreams", "watch", id).must(t)
	assertContains(t, r.stdout, "→ bash", "← bash: neovim", "dreamt", "dream "+id+" completed: its result is in memory store memstore_")
	out, _ := dreamField(t, s, id, "outputs").([]any)
	if len(out) != 1 {
		t.Fatalf("outputs %v", out)
	}
	outStore, _ := out[0].(map[string]any)["memory_store_id"].(string)
	if outStore == "" || outStore == store || !strings.Contains(r.stdout, outStore) {
		t.Fatalf("output store %q (input %s) in:\n%s", outStore, store, r.stdout)
	}

	r = s.run(t, "dreams", "get", id).must(t)
	assertContains(t, r.stdout, "status:", "completed", "output store:    "+outStore, "session:", "sesn_", "ended:")
	r = s.run(t, "dreams", "list").must(t)
	assertContains(t, r.stdout, "ID", "STATUS", "OUTPUT", id, "completed", outStore)
	r = s.run(t, "dreams", "list", "--status", "pending", "--status", "running").must(t)
	if strings.Contains(r.stdout, id) {
		t.Errorf("--status pending/running lists the completed dream:\n%s", r.stdout)
	}
	r = s.run(t, "dreams", "list", "--status", "completed").must(t)
	assertContains(t, r.stdout, id)
	if r := s.run(t, "dreams", "list", "--status", "sleeping"); r.err == nil || !strings.Contains(r.err.Error(), "sleeping") || !strings.Contains(r.err.Error(), "HTTP 400") {
		t.Errorf("unknown status: err = %v", r.err)
	}
	if r := s.run(t, "dreams", "cancel", id); r.err == nil || !strings.Contains(r.err.Error(), "HTTP 400") || !strings.Contains(r.err.Error(), "completed") {
		t.Errorf("cancel of a completed dream: err = %v", r.err)
	}

	// JSON lines: the session's events, then the dream.
	r = s.run(t, "dreams", "watch", id, "-o", "json").must(t)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var types []string
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("watch -o json line %q: %v", l, err)
		}
		types = append(types, m["type"].(string))
	}
	if last := lines[len(lines)-1]; types[len(types)-1] != "dream" || !strings.Contains(last, `"status":"completed"`) || !strings.Contains(r.stdout, `"type":"agent.tool_use"`) {
		t.Errorf("watch -o json: types %v, last %s", types, last)
	}

	r = s.run(t, "dreams", "archive", id).must(t)
	assertContains(t, r.stdout, "archived:")
	if r := s.run(t, "dreams", "list").must(t); strings.Contains(r.stdout, id) {
		t.Errorf("the archived dream is listed:\n%s", r.stdout)
	}
	r = s.run(t, "dreams", "list", "--include-archived").must(t)
	assertContains(t, r.stdout, id, "completed (archived)")

	// A dream that runs until canceled, watched meanwhile.
	r = s.run(t, "dreams", "create", "--store", store, "--session", sessions[0], "--model", "scripted", "--instructions", "@@sleep 60s", "--update-existing").must(t)
	assertContains(t, r.stdout, "output behavior: update_existing")
	long := regexp.MustCompile(`drm_\w+`).FindString(r.stdout)
	if got := dreamField(t, s, long, "instructions"); got != "@sleep 60s" {
		t.Errorf("instructions %q, want @sleep 60s", got)
	}
	watched := make(chan result, 1)
	go func() { watched <- s.run(t, "dreams", "watch", long) }()
	deadline := time.Now().Add(30 * time.Second)
	for dreamField(t, s, long, "status") != "running" {
		if time.Now().After(deadline) {
			t.Fatal("the dream does not run")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.run(t, "dreams", "archive", long); r.err == nil || !strings.Contains(r.err.Error(), "HTTP 400") {
		t.Errorf("archive of a running dream: err = %v", r.err)
	}
	time.Sleep(2 * dreamPoll) // the watch sees it running
	r = s.run(t, "dreams", "cancel", long).must(t)
	assertContains(t, r.stdout, "status:", "canceled")
	select {
	case w := <-watched:
		if w.code() != 1 || !strings.Contains(w.err.Error(), "the dream was canceled") {
			t.Errorf("watch of a canceled dream: code %d, err %v", w.code(), w.err)
		}
		assertContains(t, w.stdout, "dream "+long+" is running as session sesn_", "writing memory store "+store, "dream "+long+" was canceled")
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not end when the dream was canceled")
	}

	// A dream whose model fails: watch shows the session's error.
	r = s.run(t, "dreams", "create", "--store", store, "--session", sessions[1], "--model", "scripted", "--instructions", "@@fail overloaded").must(t)
	failing := regexp.MustCompile(`drm_\w+`).FindString(r.stdout)
	if w := s.run(t, "dreams", "watch", failing); w.code() != 1 || !strings.Contains(w.err.Error(), "the dream failed") {
		t.Errorf("watch of a failing dream: code %d, err %v", w.code(), w.err)
	} else {
		assertContains(t, w.stdout, "dream "+failing+" failed: model_overloaded_error: ")
	}
	assertContains(t, s.run(t, "dreams", "get", failing).must(t).stdout, "error:", "model_overloaded_error")

	// Errors a person can act on.
	if r := s.run(t, "dreams", "create", "--store", store, "--model", "scripted"); r.err == nil || !strings.Contains(r.err.Error(), "--session is required") {
		t.Errorf("no --session: err = %v", r.err)
	}
	if r := s.run(t, "dreams", "create", "--store", "memstore_nope", "--session", sessions[0], "--model", "scripted"); r.err == nil || !strings.Contains(r.err.Error(), "HTTP 404") {
		t.Errorf("unknown store: err = %v", r.err)
	}
	if r := s.run(t, "dreams", "create", "--store", store, "--session", sessions[0], "--model", "scripted", "--instructions", "@/nonexistent/steer.md"); r.err == nil || !strings.Contains(r.err.Error(), "write @@ for a leading @") {
		t.Errorf("missing instructions file: err = %v", r.err)
	}
	if r := s.run(t, "dreams", "get", "drm_nope"); r.err == nil || !strings.Contains(r.err.Error(), "HTTP 404") {
		t.Errorf("unknown dream: err = %v", r.err)
	}
}
