package toolhost

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestSkillsPromptPaths: cloud sessions in a sandbox are told their
// skills' absolute path under /workspace; self-hosted sessions, and cloud
// sessions without a sandbox, a path relative to their workspace; a
// deleted version is left out, and no skill left means no section.
func TestSkillsPromptPaths(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := ma.Time(time.Now())
	for id, typ := range map[string]string{"env_cloud": ma.EnvCloud, "env_self": ma.EnvSelfHosted} {
		if err := st.CreateEnvironment(ctx, ma.Environment{ID: id, Type: "environment", Name: id, Config: ma.EnvironmentConfig{Type: typ}, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	v := store.SkillVersion{SkillVersion: ma.SkillVersion{ID: "1", Type: "skill_version", SkillID: "skill_1", Name: "pdf-tools",
		Description: "Reads <PDF> files & tables.", CreatedAt: now}}
	sk := store.Skill{Skill: ma.Skill{ID: "skill_1", Type: "skill", LatestVersionID: "1", CreatedAt: now, UpdatedAt: now}, Name: "pdf-tools"}
	if err := st.CreateSkill(ctx, sk, v, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	sess := func(env string) *ma.Session {
		return &ma.Session{ID: "sesn_1", EnvironmentID: env, Agent: ma.SessionAgent{Skills: []ma.SkillRef{{Type: "custom", SkillID: "skill_1", Version: "1"}}}}
	}
	for _, c := range []struct {
		env       string
		sandboxed bool
		location  string
	}{
		{"env_cloud", true, "<location>/workspace/skills/pdf-tools/SKILL.md</location>"},
		{"env_cloud", false, "<location>skills/pdf-tools/SKILL.md</location>"},
		{"env_self", true, "<location>skills/pdf-tools/SKILL.md</location>"},
	} {
		got, err := skillPrompts{st: st, sandboxed: c.sandboxed}.SkillsPrompt(ctx, sess(c.env))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{c.location, "<name>pdf-tools</name>", "<description>Reads &lt;PDF&gt; files &amp; tables.</description>", "<skills>", "</skills>"} {
			if !strings.Contains(got, want) {
				t.Fatalf("%s (sandboxed %v): prompt lacks %q:\n%s", c.env, c.sandboxed, want, got)
			}
		}
	}
	if err := st.DeleteSkillVersion(ctx, "skill_1", "1"); err != nil {
		t.Fatal(err)
	}
	if got, err := (skillPrompts{st: st}).SkillsPrompt(ctx, sess("env_self")); err != nil || got != "" {
		t.Fatalf("with the version deleted: %q, %v", got, err)
	}
}
