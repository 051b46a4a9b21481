package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/fakeanthropic"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
)

const skillBody = "# PDF tools\n\nTo extract text, run scripts/extract.py on the file. The secret step is: marmalade.\n"

// skillMD is a SKILL.md with front matter.
func skillMD(name, description string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\n---\n" + skillBody
}

// skillFiles are upload parts named by their paths.
func skillFiles(files ...string) []io.Reader {
	var out []io.Reader
	for i := 0; i+1 < len(files); i += 2 {
		out = append(out, anthropic.File(strings.NewReader(files[i+1]), files[i], "text/plain"))
	}
	return out
}

// zipOf is a zip archive of name/content pairs.
func zipOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		w, err := zw.Create(files[i])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[i+1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// unzipped reads a downloaded archive: path → content.
func unzipped(t *testing.T, res *http.Response) map[string]string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("content is not a zip archive: %v", err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		c, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out[f.Name] = string(c)
	}
	return out
}

// TestSkillsAPI drives /v1/skills with the official Go SDK: a directory
// upload, get, list with its cursor, versions (create, list, get, latest,
// download as a zip whose files equal the upload's, delete), a zip
// upload, and delete (refused while versions remain).
func TestSkillsAPI(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	script := "print('extract')\n"
	sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files: skillFiles("upload-dir/SKILL.md", skillMD("pdf-tools", "Extracts text from PDF files."),
			"upload-dir/scripts/extract.py", script, "upload-dir/reference.md", "more"),
		DisplayName: anthropic.String("PDF tools"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sk.ID, "skill_") || sk.DisplayName != "PDF tools" || sk.Source.Type != "custom" || sk.LatestVersionID == "" || sk.CreatedAt.IsZero() || sk.Type != "skill" {
		t.Fatalf("created %s", sk.RawJSON())
	}
	v1, err := s.client.Beta.Skills.Versions.Get(ctx, sk.LatestVersionID, anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	if err != nil || v1.Name != "pdf-tools" || v1.Description != "Extracts text from PDF files." || v1.SkillID != sk.ID || v1.Type != "skill_version" {
		t.Fatalf("version: %v %v", v1, err)
	}
	for _, c := range v1.ID {
		if c < '0' || c > '9' {
			t.Fatalf("version id %q is not numeric", v1.ID)
		}
	}
	res, err := s.client.Beta.Skills.Versions.Download(ctx, v1.ID, anthropic.BetaSkillVersionDownloadParams{SkillID: sk.ID})
	if err != nil {
		t.Fatal(err)
	}
	if ct, cd := res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"); ct != "application/zip" || !strings.Contains(cd, "pdf-tools.zip") {
		t.Fatalf("download headers %q %q", ct, cd)
	}
	files := unzipped(t, res)
	// Under the skill's name, not the uploaded directory's.
	want := map[string]string{"pdf-tools/SKILL.md": skillMD("pdf-tools", "Extracts text from PDF files."), "pdf-tools/scripts/extract.py": script, "pdf-tools/reference.md": "more"}
	if len(files) != len(want) {
		t.Fatalf("archive has %v", files)
	}
	for name, content := range want {
		if files[name] != content {
			t.Fatalf("archive's %s = %q, want %q", name, files[name], content)
		}
	}

	// A second skill, uploaded as one zip; display_name defaults to the name.
	other, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files: []io.Reader{anthropic.File(bytes.NewReader(zipOf(t, "notes/SKILL.md", skillMD("notes", "Keeps notes."), "notes/a/b.txt", "deep")), "notes.zip", "application/zip")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if other.DisplayName != "notes" {
		t.Fatalf("zip upload %s", other.RawJSON())
	}
	res, err = s.client.Beta.Skills.Versions.Download(ctx, other.LatestVersionID, anthropic.BetaSkillVersionDownloadParams{SkillID: other.ID})
	if err != nil {
		t.Fatal(err)
	}
	if files := unzipped(t, res); files["notes/a/b.txt"] != "deep" || len(files) != 2 {
		t.Fatalf("zip upload's archive %v", files)
	}

	got, err := s.client.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{})
	if err != nil || got.ID != sk.ID || got.LatestVersionID != v1.ID {
		t.Fatalf("get: %v %v", got, err)
	}
	page, err := s.client.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{Limit: anthropic.Int(1)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != other.ID || page.NextPage == "" {
		t.Fatalf("first page (newest first): %+v %v", page, err)
	}
	var all []string
	for it := s.client.Beta.Skills.ListAutoPaging(ctx, anthropic.BetaSkillListParams{Limit: anthropic.Int(1)}); it.Next(); {
		all = append(all, it.Current().ID)
	}
	if len(all) != 2 || all[1] != sk.ID {
		t.Fatalf("paging: %v", all)
	}
	if none, err := s.client.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{Source: anthropic.String("anthropic")}); err != nil || len(none.Data) != 0 {
		t.Fatalf("anthropic skills: %+v %v", none, err)
	}

	// A new version: the latest; listed newest first.
	v2, err := s.client.Beta.Skills.Versions.New(ctx, sk.ID, anthropic.BetaSkillVersionNewParams{
		Files: skillFiles("pdf-tools/SKILL.md", skillMD("pdf-tools", "Extracts text and tables from PDF files.")),
	})
	if err != nil {
		t.Fatal(err)
	}
	if v2.ID <= v1.ID || v2.Description != "Extracts text and tables from PDF files." {
		t.Fatalf("second version %s after %s", v2.RawJSON(), v1.ID)
	}
	latest, err := s.client.Beta.Skills.Versions.Get(ctx, "latest", anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	if err != nil || latest.ID != v2.ID {
		t.Fatalf("latest: %v %v", latest, err)
	}
	var versions []string
	for it := s.client.Beta.Skills.Versions.ListAutoPaging(ctx, sk.ID, anthropic.BetaSkillVersionListParams{Limit: anthropic.Int(1)}); it.Next(); {
		versions = append(versions, it.Current().ID)
	}
	if len(versions) != 2 || versions[0] != v2.ID || versions[1] != v1.ID {
		t.Fatalf("versions %v", versions)
	}
	// Another name in a later version is refused.
	_, err = s.client.Beta.Skills.Versions.New(ctx, sk.ID, anthropic.BetaSkillVersionNewParams{Files: skillFiles("x/SKILL.md", skillMD("renamed", "d"))})
	apiErrSays(t, err, http.StatusBadRequest, "pdf-tools")

	// Delete: refused while versions remain.
	_, err = s.client.Beta.Skills.Delete(ctx, sk.ID, anthropic.BetaSkillDeleteParams{})
	apiErrSays(t, err, http.StatusBadRequest, "versions")
	del, err := s.client.Beta.Skills.Versions.Delete(ctx, v2.ID, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID})
	if err != nil || del.ID != v2.ID || del.Type != "skill_version_deleted" {
		t.Fatalf("delete version: %v %v", del, err)
	}
	if got, _ := s.client.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{}); got.LatestVersionID != v1.ID {
		t.Fatalf("latest after deleting the newest: %s", got.RawJSON())
	}
	_, err = s.client.Beta.Skills.Versions.Download(ctx, v2.ID, anthropic.BetaSkillVersionDownloadParams{SkillID: sk.ID})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	if _, err := s.client.Beta.Skills.Versions.Delete(ctx, v1.ID, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID}); err != nil {
		t.Fatal(err)
	}
	gone, err := s.client.Beta.Skills.Delete(ctx, sk.ID, anthropic.BetaSkillDeleteParams{})
	if err != nil || gone.ID != sk.ID || gone.Type != "skill_deleted" {
		t.Fatalf("delete: %v %v", gone, err)
	}
	_, err = s.client.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
}

// apiErrSays is apiErr for an invalid request or a not-found whose
// message names the problem.
func apiErrSays(t *testing.T, err error, status int, says string) {
	t.Helper()
	typ := "invalid_request_error"
	switch status {
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	}
	apiErr(t, err, status, typ)
	if !strings.Contains(err.Error(), says) {
		t.Fatalf("error does not say %q: %v", says, err)
	}
}

// TestSkillUploadRefusals: each bad upload is a 400 naming its problem,
// an oversized one a 413; unknown skills are 404s; Anthropic skills and
// deleted versions are refused on agents and sessions.
func TestSkillUploadRefusals(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) { c.HTTP.MaxFileSize = 1 << 20 })
	ctx := context.Background()
	good := skillMD("ok-skill", "Does things.")
	corrupt := zipOf(t, "ok-skill/SKILL.md", good)
	corrupt = corrupt[:len(corrupt)-30] // its central directory cut
	for _, c := range []struct {
		name  string
		files []io.Reader
		says  string
	}{
		{"no SKILL.md", skillFiles("ok-skill/README.md", "hi"), "no SKILL.md"},
		{"SKILL.md not at the root", skillFiles("ok-skill/sub/SKILL.md", good), "no SKILL.md"},
		{"no front matter", skillFiles("ok-skill/SKILL.md", "# just a body\n"), "front matter"},
		{"unclosed front matter", skillFiles("ok-skill/SKILL.md", "---\nname: ok-skill\n"), "closing ---"},
		{"bad YAML", skillFiles("ok-skill/SKILL.md", "---\nname: [ok\n---\n"), "not valid YAML"},
		{"no name", skillFiles("ok-skill/SKILL.md", "---\ndescription: d\n---\n"), "no name"},
		{"bad name", skillFiles("ok-skill/SKILL.md", skillMD("Bad_Name", "d")), "lowercase letters"},
		{"reserved name", skillFiles("ok-skill/SKILL.md", skillMD("claude-helper", "d")), "reserved word"},
		{"no description", skillFiles("ok-skill/SKILL.md", "---\nname: ok-skill\n---\n"), "no description"},
		{"long description", skillFiles("ok-skill/SKILL.md", skillMD("ok-skill", strings.Repeat("d", 1025))), "1024"},
		{"path escape", skillFiles("ok-skill/SKILL.md", good, "ok-skill/../evil.sh", "x"), "escapes"},
		{"absolute path", skillFiles("/etc/ok-skill/SKILL.md", good), "absolute"},
		{"two top-level directories", skillFiles("ok-skill/SKILL.md", good, "other/x.md", "x"), "two top-level directories"},
		{"no top-level directory", skillFiles("SKILL.md", good), "not under a top-level directory"},
		{"duplicate", skillFiles("ok-skill/SKILL.md", good, "ok-skill/SKILL.md", good), "given twice"},
		{"corrupt zip", []io.Reader{anthropic.File(bytes.NewReader(corrupt), "ok-skill.zip", "application/zip")}, "not a valid zip archive"},
		{"zip escape", []io.Reader{anthropic.File(bytes.NewReader(zipOf(t, "ok-skill/SKILL.md", good, "ok-skill/../../x", "x")), "s.zip", "application/zip")}, "escapes"},
		{"no files", nil, "files[]"},
	} {
		_, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: c.files})
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		t.Run(c.name, func(t *testing.T) { apiErrSays(t, err, http.StatusBadRequest, c.says) })
	}
	_, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files: []io.Reader{anthropic.File(strings.NewReader(good), "ok-skill/SKILL.md", "text/plain"), anthropic.File(bytes.NewReader(make([]byte, 1<<20)), "ok-skill/big.bin", "")},
	})
	apiErrSays(t, err, http.StatusRequestEntityTooLarge, "larger than")
	if page, err := s.client.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{}); err != nil || len(page.Data) != 0 {
		t.Fatalf("refused uploads left skills: %+v %v", page, err)
	}

	_, err = s.client.Beta.Skills.Get(ctx, "skill_missing", anthropic.BetaSkillGetParams{})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = s.client.Beta.Skills.Versions.New(ctx, "skill_missing", anthropic.BetaSkillVersionNewParams{Files: skillFiles("ok-skill/SKILL.md", good)})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = s.client.Beta.Skills.Versions.Download(ctx, "1", anthropic.BetaSkillVersionDownloadParams{SkillID: "skill_missing"})
	apiErr(t, err, http.StatusNotFound, "not_found_error")

	newAgent := func(skills ...anthropic.BetaManagedAgentsSkillParamsUnion) (*anthropic.BetaManagedAgentsAgent, error) {
		return s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "a", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}, Skills: skills})
	}
	_, err = newAgent(anthropic.BetaManagedAgentsSkillParamsOfCustom("skill_missing"))
	apiErrSays(t, err, http.StatusNotFound, "skills[0]")
	_, err = newAgent(anthropic.BetaManagedAgentsSkillParamsOfAnthropic("xlsx"))
	apiErrSays(t, err, http.StatusBadRequest, "Anthropic skills")
	sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles("ok-skill/SKILL.md", good)})
	if err != nil {
		t.Fatal(err)
	}
	pinned := anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID)
	pinned.OfCustom.Version = anthropic.String("123")
	_, err = newAgent(pinned)
	apiErrSays(t, err, http.StatusNotFound, "version 123")
	var many []anthropic.BetaManagedAgentsSkillParamsUnion
	for range 21 {
		many = append(many, anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID))
	}
	_, err = newAgent(many...)
	apiErrSays(t, err, http.StatusBadRequest, "at most 20")
	_, err = newAgent(anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID), anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID))
	apiErrSays(t, err, http.StatusBadRequest, "distinct names")

	// An agent pins the latest version; once it is deleted, new sessions
	// of the agent are refused, naming it.
	a, err := newAgent(anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Skills) != 1 || a.Skills[0].Version != sk.LatestVersionID || a.Skills[0].Type != "custom" {
		t.Fatalf("agent skills %s", a.RawJSON())
	}
	// Updates: the same skill again is no change; [] clears; skills are a
	// full replacement, pinned again.
	update := func(skills ...anthropic.BetaManagedAgentsSkillParamsUnion) *anthropic.BetaManagedAgentsAgent {
		t.Helper()
		if skills == nil {
			skills = []anthropic.BetaManagedAgentsSkillParamsUnion{}
		}
		got, err := s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(a.Version), Skills: skills})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if same := update(anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID)); same.Version != a.Version {
		t.Fatalf("the same skills made version %d", same.Version)
	}
	if a = update(); a.Version != 2 || len(a.Skills) != 0 {
		t.Fatalf("cleared: %s", a.RawJSON())
	}
	if a = update(anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID)); a.Version != 3 || len(a.Skills) != 1 || a.Skills[0].Version != sk.LatestVersionID {
		t.Fatalf("skills again: %s", a.RawJSON())
	}
	_, err = s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(a.Version),
		Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{anthropic.BetaManagedAgentsSkillParamsOfAnthropic("pdf")}})
	apiErrSays(t, err, http.StatusBadRequest, "Anthropic skills")
	if _, err := s.client.Beta.Skills.Versions.Delete(ctx, sk.LatestVersionID, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: s.newEnv(t, "env").ID})
	apiErrSays(t, err, http.StatusBadRequest, "was deleted")
}

// TestSkillInSession: a skill attached to an agent is offered to the model
// by name, description and SKILL.md path in the system prompt, without its
// body; the model reads the body with the read tool, from the skill's
// files placed read-only in the workspace. A session can replace the
// agent's skills (agent_with_overrides).
func TestSkillInSession(t *testing.T) {
	s, fake := startWithFakeAnthropic(t)
	ctx := context.Background()
	sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files: skillFiles("pdf-tools/SKILL.md", skillMD("pdf-tools", "Extracts text from PDF files."), "pdf-tools/scripts/extract.py", "print(1)\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "with a skill", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: provider.DefaultModel},
		System: anthropic.String("You are careful."),
		Tools:  []anthropic.BetaAgentNewParamsToolUnion{toolset(false)},
		Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID)},
	})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	if len(sess.Agent.Skills) != 1 || sess.Agent.Skills[0].SkillID != sk.ID || sess.Agent.Skills[0].Version != sk.LatestVersionID {
		t.Fatalf("session agent skills %s", sess.RawJSON())
	}
	fake.Push(fakeanthropic.Reply(fakeanthropic.ToolUseBlock("toolu_1", "read", `{"file_path":"skills/pdf-tools/SKILL.md"}`)).WithStopReason("tool_use"))
	fake.Push(fakeanthropic.Reply(fakeanthropic.ToolUseBlock("toolu_2", "bash", `{"command":"ls -l skills/pdf-tools/scripts; echo x >> skills/pdf-tools/SKILL.md && echo WRITABLE"}`)).WithStopReason("tool_use"))
	fake.Push(fakeanthropic.Text("marmalade"))
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("extract the text of a.pdf"))
	var results []string
	for _, ev := range st.until(isIdle) {
		if ev.Type == "agent.tool_result" {
			var out strings.Builder
			for _, b := range ev.Content {
				out.WriteString(b.Text)
			}
			results = append(results, out.String())
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "The secret step is: marmalade.") {
		t.Fatalf("read's result does not hold SKILL.md's body: %q", results)
	}
	if !strings.Contains(results[1], "extract.py") || !strings.Contains(results[1], "r--r--r--") || strings.Contains(results[1], "WRITABLE") {
		t.Fatalf("the skill's files are not there read-only: %q", results[1])
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	system := systemPrompt(t, reqs[0].Body)
	for _, want := range []string{"You are careful.", "<name>pdf-tools</name>", "<description>Extracts text from PDF files.</description>", "skills/pdf-tools/SKILL.md</location>", "read tool"} {
		if !strings.Contains(system, want) {
			t.Fatalf("system prompt lacks %q:\n%s", want, system)
		}
	}
	if strings.Contains(system, "marmalade") {
		t.Fatalf("the skill's body is in the system prompt:\n%s", system)
	}
	if !strings.Contains(string(reqs[1].Raw), "The secret step is: marmalade.") {
		t.Fatalf("the second model request lacks the tool result: %s", reqs[1].Raw)
	}

	// A session that clears the agent's skills: no skills section.
	cleared, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfBetaManagedAgentsAgentWithOverrides: &anthropic.BetaManagedAgentsAgentWithOverridesParams{
			ID: a.ID, Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{}}},
		EnvironmentID: sess.EnvironmentID,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cleared.Agent.Skills) != 0 {
		t.Fatalf("cleared skills: %s", cleared.RawJSON())
	}
	fake.Push(fakeanthropic.Text("ok"))
	st = s.openStream(t, cleared.ID)
	s.send(t, cleared.ID, userMessage("hi"))
	st.until(isIdle)
	reqs = fake.Requests()
	if system := systemPrompt(t, reqs[len(reqs)-1].Body); strings.Contains(system, "<skills>") {
		t.Fatalf("skills offered to a session that cleared them:\n%s", system)
	}
}

// systemPrompt is the text of a Messages API request's system field.
func systemPrompt(t *testing.T, body map[string]any) string {
	t.Helper()
	switch v := body["system"].(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, blk := range v {
			if m, ok := blk.(map[string]any); ok {
				s, _ := m["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

// TestOfficialWorkerDownloadsSkills: the official SDK's environment
// worker, with the sessions token of its work item, downloads a session's
// skills into
// {workdir}/skills/<name>/ (it reads the versions and their zip content);
// the model, told the path relative to the workspace, reads SKILL.md
// there. The key cannot change skills.
func TestOfficialWorkerDownloadsSkills(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files: skillFiles("pdf-tools/SKILL.md", skillMD("pdf-tools", "Extracts text from PDF files.")),
	})
	if err != nil {
		t.Fatal(err)
	}
	envID, key := s.selfHosted(t, "pull")
	a, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "worker skill", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools:  []anthropic.BetaAgentNewParamsToolUnion{toolset(false)},
		Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// What the key may do with skills.
	if _, err := call(s.url, key, "GET", "/v1/skills/"+sk.ID+"/versions/latest", nil, nil); err != nil {
		t.Fatalf("the environment key cannot read a skill version: %v", err)
	}
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/v1/skills/" + sk.ID + "/versions/" + sk.LatestVersionID},
		{"GET", "/v1/skills"},
		{"DELETE", "/v1/skills/" + sk.ID},
		{"POST", "/v1/skills/" + sk.ID + "/versions"},
	} {
		if status, _ := call(s.url, key, c.method, c.path, nil, nil); status != http.StatusForbidden {
			t.Fatalf("%s %s with the environment key: %d, want 403", c.method, c.path, status)
		}
	}

	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	workdir := t.TempDir()
	wctx, cancel := context.WithCancel(ctx)
	idle := 2 * time.Second
	worker := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(s.url), option.WithMaxRetries(0)),
		environments.EnvironmentWorkerOptions{EnvironmentID: envID, EnvironmentKey: key, Workdir: workdir, MaxIdle: &idle,
			Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- worker.Run(wctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	s.waitWorkState(t, envID, "active")
	s.send(t, sess.ID, userMessage(`@tool read {"file_path":"skills/pdf-tools/SKILL.md"}`+"\n@then done"))
	var result string
	for _, f := range st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" }) {
		if f.Type == "user.tool_result" && f.ProcessedAt != nil {
			for _, b := range f.Content {
				result += b.Text
			}
		}
	}
	if !strings.Contains(result, "The secret step is: marmalade.") {
		t.Fatalf("the worker's read of the skill: %q", result)
	}
}

// TestSkillOnReinsExecutor: a self-hosted session served by an executor
// (the executor package's client over a real WebSocket) gets its skill's
// files placed read-only in the executor's workspace, and reads SKILL.md
// at the relative path the prompt gives.
func TestSkillOnReinsExecutor(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{
		Files: skillFiles("pdf-tools/SKILL.md", skillMD("pdf-tools", "Extracts text from PDF files."), "pdf-tools/scripts/extract.py", "print(1)\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	envID, key := s.selfHosted(t, "hands")
	ws := startExecutorClient(t, s.url, key, "skills-hands")
	a, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "executor skill", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools:  []anthropic.BetaAgentNewParamsToolUnion{toolset(false)},
		Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{anthropic.BetaManagedAgentsSkillParamsOfCustom(sk.ID)},
	})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool read {"file_path":"skills/pdf-tools/SKILL.md"}`+"\n"+
		`@tool bash {"command":"stat -c %a skills/pdf-tools/SKILL.md skills/pdf-tools/scripts/extract.py"}`+"\n@then done"))
	var results []string
	for _, f := range st.until(isIdle) {
		if f.Type == "agent.tool_result" {
			var out strings.Builder
			for _, b := range f.Content {
				out.WriteString(b.Text)
			}
			results = append(results, out.String())
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "The secret step is: marmalade.") || strings.Count(results[1], "444") != 2 {
		t.Fatalf("tool results %q", results)
	}
	if m, _ := filepath.Glob(filepath.Join(ws, "*", "skills", "pdf-tools", "scripts", "extract.py")); len(m) != 1 {
		t.Fatalf("the skill is not in the executor's workspace %s", ws)
	}
}
