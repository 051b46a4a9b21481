package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestSessionOutputs: files a cloud session's bash writes to
// /mnt/session/outputs (the workspace's outputs directory) become Files
// of the session's scope: listed with scope_id, downloadable with equal
// bytes, kept once per path and content; symbolic links are not followed.
func TestSessionOutputs(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	agent := s.newAgent(t, "scripted", anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}})
	sess := s.newSession(t, agent.ID, s.newEnv(t, "outputs").ID)
	other := s.newSession(t, agent.ID, s.newEnv(t, "other").ID)

	out := s.toolOutput(t, sess.ID, "ls -ld /mnt/session/outputs && printf 'hello outputs\\n' > /mnt/session/outputs/report.txt && "+
		"mkdir -p /workspace/outputs/data && head -c 300000 /dev/urandom > outputs/data/blob.bin && sha256sum outputs/data/blob.bin && "+
		"ln -s /etc/passwd /mnt/session/outputs/passwd && echo written")
	if !strings.Contains(out, "written") {
		t.Fatalf("bash: %s", out)
	}
	blobSum := strings.Fields(out[strings.Index(out, "\n")+1:])[0]

	list := func(scope string) map[string]anthropic.BetaFileMetadata {
		t.Helper()
		page, err := s.client.Beta.Files.List(ctx, anthropic.BetaFileListParams{ScopeID: anthropic.String(scope)})
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]anthropic.BetaFileMetadata{}
		for _, f := range page.Data {
			if _, newer := files[f.Filename]; !newer {
				files[f.Filename] = f
			}
		}
		return files
	}
	download := func(id string) []byte {
		t.Helper()
		res, err := s.client.Beta.Files.Download(ctx, id, anthropic.BetaFileDownloadParams{})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files := list(sess.ID)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"data/blob.bin", "report.txt"}) {
		t.Fatalf("outputs listed: %v", names)
	}
	report := files["report.txt"]
	if !report.Downloadable || report.Scope.ID != sess.ID || report.Scope.Type != "session" || report.MimeType != "text/plain" {
		t.Errorf("report.txt: %s", report.RawJSON())
	}
	if got := string(download(report.ID)); got != "hello outputs\n" {
		t.Errorf("report.txt content %q", got)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(download(files["data/blob.bin"].ID))); got != blobSum {
		t.Errorf("blob.bin downloaded with sha256 %s, written with %s", got, blobSum)
	}
	if len(list(other.ID)) != 0 {
		t.Errorf("another session's scope lists outputs")
	}

	// Rewriting the same content keeps no second copy; new content is a
	// new file of the same name.
	s.toolOutput(t, sess.ID, "printf 'hello outputs\\n' > /mnt/session/outputs/report.txt; touch outputs/data/blob.bin")
	if page, err := s.client.Beta.Files.List(ctx, anthropic.BetaFileListParams{ScopeID: anthropic.String(sess.ID)}); err != nil || len(page.Data) != 2 {
		t.Fatalf("outputs after rewriting the same content: %v %v", page, err)
	}
	if n := len(list(sess.ID)); n != 2 {
		t.Fatalf("%d outputs after rewriting the same content, want 2", n)
	}
	s.toolOutput(t, sess.ID, "printf 'second version\\n' > /mnt/session/outputs/report.txt")
	// The file tools take /mnt/session/outputs paths too.
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool write {"file_path":"/mnt/session/outputs/notes.md","content":"# notes\n"}`+"\n@then done"))
	for _, ev := range st.until(isIdle) {
		if ev.Type == "agent.tool_result" && ev.IsError != nil && *ev.IsError {
			t.Fatalf("write: %+v", ev.Content)
		}
	}
	st.cancel()
	page, err := s.client.Beta.Files.List(ctx, anthropic.BetaFileListParams{ScopeID: anthropic.String(sess.ID)})
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, f := range page.Data {
		if f.Filename == "report.txt" {
			versions = append(versions, string(download(f.ID)))
		}
	}
	if !slices.Equal(versions, []string{"second version\n", "hello outputs\n"}) {
		t.Fatalf("report.txt versions (newest first): %q", versions)
	}
	notes, ok := list(sess.ID)["notes.md"]
	if !ok || string(download(notes.ID)) != "# notes\n" {
		t.Fatalf("notes.md written by the write tool: %v", ok)
	}
}
