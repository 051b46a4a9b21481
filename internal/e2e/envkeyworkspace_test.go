package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/store"
)

// TestEnvironmentKeyInItsWorkspace: the key of a self-hosted environment
// in a workspace other than the default works in that workspace: the
// official SDK worker, with the key, takes its session's work, downloads
// the agent's skill and runs its tools; the key reads its workspace's
// skill versions but not another workspace's (404), and a request naming
// another workspace in anthropic-workspace-id is refused (403).
func TestEnvironmentKeyInItsWorkspace(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	w, err := s.client.Organization.Workspaces.New(ctx, anthropic.OrganizationWorkspaceNewParams{Name: "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	dev := s.developer(t, w.ID, "dev-b", "developer")
	b := &server{app: s.app, url: s.url, key: devKey(dev), client: dev.client} // works in team-b
	newSkill := func(s *server, name string) string {
		sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(name+"/SKILL.md", skillMD(name, "A skill of "+name+"."))})
		if err != nil {
			t.Fatal(err)
		}
		return sk.ID
	}
	skillB, skillDefault := newSkill(b, "b-tools"), newSkill(s, "default-tools")
	envID, key := b.selfHosted(t, "pull-b")

	if _, err := call(s.url, key, "GET", "/v1/skills/"+skillB+"/versions/latest", nil, nil); err != nil {
		t.Fatalf("the environment key reading its workspace's skill: %v", err)
	}
	if status, err := call(s.url, key, "GET", "/v1/skills/"+skillDefault+"/versions/latest", nil, nil); status != http.StatusNotFound {
		t.Fatalf("the environment key reading another workspace's skill: %d %v, want 404", status, err)
	}
	status, err := callWith(s.url, "GET", "/v1/skills/"+skillB+"/versions/latest", nil, nil, func(h map[string]string) {
		h["x-api-key"], h["anthropic-workspace-id"] = key, store.DefaultWorkspace
	})
	if status != http.StatusForbidden || err == nil || !strings.Contains(err.Error(), w.ID) {
		t.Fatalf("the environment key naming another workspace: %d %v, want 403 naming %s", status, err, w.ID)
	}

	a, err := b.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "worker in b", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools:  []anthropic.BetaAgentNewParamsToolUnion{toolset(false)},
		Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{anthropic.BetaManagedAgentsSkillParamsOfCustom(skillB)},
	})
	if err != nil {
		t.Fatal(err)
	}
	sess := b.newSession(t, a.ID, envID)
	st := b.openStream(t, sess.ID)
	wctx, cancel := context.WithCancel(ctx)
	idle := 2 * time.Second
	worker := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(s.url), option.WithMaxRetries(0)),
		environments.EnvironmentWorkerOptions{EnvironmentID: envID, EnvironmentKey: key, Workdir: t.TempDir(), MaxIdle: &idle,
			Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- worker.Run(wctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	b.waitWorkState(t, envID, "active")
	b.send(t, sess.ID, userMessage(`@tool read {"file_path":"skills/b-tools/SKILL.md"}`+"\n@then done"))
	var result string
	for _, f := range st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" }) {
		if f.Type == "user.tool_result" && f.ProcessedAt != nil {
			for _, b := range f.Content {
				result += b.Text
			}
		}
	}
	if !strings.Contains(result, "A skill of b-tools.") {
		t.Fatalf("the worker's read of the skill in team-b: %q", result)
	}
}
