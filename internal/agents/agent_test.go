package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// skillShelf finds the skills it holds, by id; latest is the last version.
type skillShelf map[string][]ma.SkillVersion

var errNoSkill = errors.New("no such skill")

func (s skillShelf) find(_ context.Context, field, id, version string) (ma.SkillVersion, error) {
	vs := s[id]
	if len(vs) == 0 {
		return ma.SkillVersion{}, fmt.Errorf("%sskill %s: %w", field, id, errNoSkill)
	}
	if version == "" || version == "latest" {
		return vs[len(vs)-1], nil
	}
	for _, v := range vs {
		if v.ID == version {
			return v, nil
		}
	}
	return ma.SkillVersion{}, fmt.Errorf("%sversion %s of skill %s: %w", field, version, id, errNoSkill)
}

var shelf = skillShelf{
	"skill_a": {{ID: "1", SkillID: "skill_a", Name: "alpha"}, {ID: "2", SkillID: "skill_a", Name: "alpha"}},
	"skill_b": {{ID: "5", SkillID: "skill_b", Name: "alpha"}},
	"skill_c": {{ID: "7", SkillID: "skill_c", Name: "gamma"}},
}

var errNotServed = errors.New("not served")

func testRules() Rules {
	return Rules{Skills: shelf.find, Agents: findRoster, Model: func(field, id string) error {
		if strings.HasPrefix(id, "unserved") {
			return fmt.Errorf("%s: %w", field, errNotServed)
		}
		return nil
	}}
}

func TestResolveSkills(t *testing.T) {
	r := testRules()
	got, err := r.ResolveSkills(t.Context(), "skills", []SkillParam{{Type: "custom", SkillID: "skill_a", Version: ptr("1")}, {Type: "custom", SkillID: "skill_c"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []ma.SkillRef{{Type: "custom", SkillID: "skill_a", Version: "1"}, {Type: "custom", SkillID: "skill_c", Version: "7"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("skills %+v, want %+v", got, want)
	}
	if none, err := r.ResolveSkills(t.Context(), "skills", nil); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("no skills: %v, %v; want [], nil", none, err)
	}
	many := make([]SkillParam, MaxSkills+1)
	for _, tc := range []struct {
		name   string
		params []SkillParam
		want   string
	}{
		{"too many", many, "agent.skills: at most 20 skills, got 21"},
		{"anthropic", []SkillParam{{Type: "anthropic", SkillID: "pdf"}}, `agent.skills[0]: Anthropic skills ("pdf") are not available on this server`},
		{"no type", []SkillParam{{SkillID: "skill_a"}}, "agent.skills[0].type: required (custom)"},
		{"other type", []SkillParam{{Type: "builtin", SkillID: "skill_a"}}, `agent.skills[0].type: must be custom; got "builtin"`},
		{"no id", []SkillParam{{Type: "custom"}}, "agent.skills[0].skill_id: required"},
		{"same name", []SkillParam{{Type: "custom", SkillID: "skill_a"}, {Type: "custom", SkillID: "skill_b"}},
			`agent.skills[1]: skill skill_b has the name "alpha", like agent.skills[0]: an agent's skills need distinct names`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.ResolveSkills(t.Context(), "agent.skills", tc.params)
			wantRule(t, err, Invalid, tc.want)
		})
	}
	// The finder's errors come back as they are, with the field first.
	_, err = r.ResolveSkills(t.Context(), "skills", []SkillParam{{Type: "custom", SkillID: "skill_c"}, {Type: "custom", SkillID: "skill_z"}})
	if !errors.Is(err, errNoSkill) || !strings.HasPrefix(err.Error(), "skills[1]: skill skill_z") {
		t.Fatalf("unknown skill: %v", err)
	}
}

func TestNew(t *testing.T) {
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	name := "helper"
	c := Create{Name: &name, Description: "helps", System: "be kind", Model: ma.ModelConfig{ID: "claude-sonnet-4-5"},
		Tools: []ToolParam{agent, docsTS}, MCPServers: []ma.MCPServer{docs}, Skills: []SkillParam{{Type: "custom", SkillID: "skill_c"}},
		Multiagent: json.RawMessage("null")}
	a, err := testRules().New(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.ID, "agent_") || a.Version != 1 || a.Type != "agent" || a.CreatedAt != ma.Time(now) || a.UpdatedAt != a.CreatedAt {
		t.Fatalf("agent %s version %d type %q created %s updated %s", a.ID, a.Version, a.Type, a.CreatedAt, a.UpdatedAt)
	}
	if len(a.Tools) != 2 || a.Tools[1].DefaultConfig.PermissionPolicy.Type != ma.PolicyAlwaysAsk || len(a.Skills) != 1 || a.Skills[0].Version != "7" {
		t.Fatalf("tools %+v skills %+v", a.Tools, a.Skills)
	}
	if a.Metadata == nil || len(a.Metadata) != 0 || string(a.Multiagent) != "null" || string(a.ExecutionIdentity) != "null" {
		t.Fatalf("metadata %v multiagent %s execution_identity %s", a.Metadata, a.Multiagent, a.ExecutionIdentity)
	}
	// Nothing given but a name and a model: empty lists, not null.
	bare, err := Rules{}.New(t.Context(), Create{Name: &name, Model: ma.ModelConfig{ID: "m"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(bare); !strings.Contains(string(b), `"tools":[],"mcp_servers":[],"skills":[]`) {
		t.Fatalf("bare agent %s", b)
	}
}

func TestNewRefuses(t *testing.T) {
	long, empty, name := strings.Repeat("n", 257), "", "helper"
	errMeta := errors.New("metadata: too many keys")
	for _, tc := range []struct {
		name string
		edit func(*Create)
		want string
	}{
		{"no name", func(c *Create) { c.Name = nil }, "name: required"},
		{"empty name", func(c *Create) { c.Name = &empty }, "name: required"},
		{"long name", func(c *Create) { c.Name = &long }, "name: must be 1 to 256 characters, got 257"},
		{"no model", func(c *Create) { c.Model = ma.ModelConfig{} }, "model: required"},
		{"description", func(c *Create) { c.Description = strings.Repeat("d", 2049) }, "description: must be 0 to 2048 characters, got 2049"},
		{"system", func(c *Create) { c.System = strings.Repeat("s", 100001) }, "system: must be 0 to 100000 characters, got 100001"},
		{"multiagent", func(c *Create) { c.Multiagent = json.RawMessage(`{}`) }, "multiagent.type: required"},
		{"execution identity first", func(c *Create) {
			c.Multiagent, c.ExecutionIdentity = json.RawMessage(`{}`), json.RawMessage(`{}`)
		}, "execution_identity: not supported by this server yet"},
		{"tools", func(c *Create) { c.Tools = []ToolParam{{}} }, "tools[0].type: required"},
		{"web search", func(c *Create) {
			c.Model.ID = "gpt-5"
			c.Tools = []ToolParam{{Type: ma.ToolTypeAgentToolset, Configs: []ToolConfigParam{{Name: "web_search"}}}}
		}, "web_search is not supported for gpt-5"},
		{"skills", func(c *Create) { c.Skills = []SkillParam{{Type: "anthropic"}} }, "skills[0]: Anthropic skills"},
		// The name comes before the model.
		{"name before model", func(c *Create) { c.Name, c.Model = nil, ma.ModelConfig{} }, "name: required"},
		// The rules of the model come before its provider.
		{"unserved and long", func(c *Create) { c.Model.ID = "unserved" + long }, "model: id longer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Create{Name: &name, Model: ma.ModelConfig{ID: "claude-sonnet-4-5"}}
			tc.edit(&c)
			_, err := testRules().New(t.Context(), c, time.Now())
			wantRule(t, err, Invalid, tc.want)
		})
	}
	// What the hooks say comes back as it is, in its place: the provider
	// after the fields, the metadata before the tools.
	c := Create{Name: &name, Model: ma.ModelConfig{ID: "unserved-1"}, Tools: []ToolParam{{}}}
	if _, err := testRules().New(t.Context(), c, time.Now()); !errors.Is(err, errNotServed) || err.Error() != "model: not served" {
		t.Fatalf("unserved model: %v", err)
	}
	c = Create{Name: &name, Model: ma.ModelConfig{ID: "m"}, Tools: []ToolParam{{}},
		Metadata: func(cur ma.Metadata) (ma.Metadata, error) { return nil, errMeta }}
	if _, err := testRules().New(t.Context(), c, time.Now()); err != errMeta {
		t.Fatalf("bad metadata: %v", err)
	}
}
