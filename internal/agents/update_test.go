package agents

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// current is an agent at version 3 with an agent toolset, an MCP server
// and its toolset, a skill and metadata.
func current(t *testing.T) ma.Agent {
	t.Helper()
	name := "helper"
	c := Create{Name: &name, Description: "helps", System: "be kind", Model: ma.ModelConfig{ID: "claude-sonnet-4-5"},
		Tools: []ToolParam{agent, docsTS}, MCPServers: []ma.MCPServer{docs}, Skills: []SkillParam{{Type: "custom", SkillID: "skill_c"}},
		Metadata: func(ma.Metadata) (ma.Metadata, error) { return ma.Metadata{"team": "docs"}, nil }}
	a, err := testRules().New(t.Context(), c, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	a.Version = 3
	return a
}

// apply prepares u and applies it to cur.
func apply(t *testing.T, cur ma.Agent, u Update, now time.Time) (ma.Agent, bool, error) {
	t.Helper()
	c, err := testRules().Prepare(t.Context(), u)
	if err != nil {
		return cur, false, err
	}
	return c.Apply(cur, now)
}

func TestApplyChanges(t *testing.T) {
	now := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	other := ma.MCPServer{Type: "url", Name: "docs", URL: "https://other.example/mcp"}
	for _, tc := range []struct {
		name string
		u    Update
		want func(a *ma.Agent)
	}{
		{"name", Update{Name: Opt[string]{Set: true, Value: "aide"}}, func(a *ma.Agent) { a.Name = "aide" }},
		{"description cleared", Update{Description: Opt[string]{Set: true, Null: true}}, func(a *ma.Agent) { a.Description = "" }},
		{"system", Update{System: Opt[string]{Set: true, Value: "be brief"}}, func(a *ma.Agent) { a.System = "be brief" }},
		{"model", Update{Model: &ma.ModelConfig{ID: "claude-opus-4-1", Speed: "fast"}}, func(a *ma.Agent) { a.Model = ma.ModelConfig{ID: "claude-opus-4-1", Speed: "fast"} }},
		{"skills pinned again", Update{Skills: &[]SkillParam{{Type: "custom", SkillID: "skill_a"}}}, func(a *ma.Agent) {
			a.Skills = []ma.SkillRef{{Type: "custom", SkillID: "skill_a", Version: "2"}}
		}},
		{"skills cleared", Update{Skills: &[]SkillParam{}}, func(a *ma.Agent) { a.Skills = []ma.SkillRef{} }},
		{"tools and servers cleared", Update{Tools: new([]ToolParam), MCPServers: new([]ma.MCPServer)}, func(a *ma.Agent) {
			a.Tools, a.MCPServers = []ma.Tool{}, []ma.MCPServer{}
		}},
		{"servers alone keep the tools", Update{MCPServers: &[]ma.MCPServer{other}}, func(a *ma.Agent) { a.MCPServers = []ma.MCPServer{other} }},
		{"metadata", Update{Metadata: func(cur ma.Metadata) (ma.Metadata, error) {
			return ma.Metadata{"team": cur["team"], "tier": "gold"}, nil
		}}, func(a *ma.Agent) { a.Metadata = ma.Metadata{"team": "docs", "tier": "gold"} }},
		{"at the version named", Update{Version: ptr(int64(3)), Name: Opt[string]{Set: true, Value: "aide"}}, func(a *ma.Agent) { a.Name = "aide" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := current(t)
			keep, _ := json.Marshal(cur)
			next, changed, err := apply(t, cur, tc.u, now)
			if err != nil || !changed {
				t.Fatalf("changed %v, err %v", changed, err)
			}
			want := current(t)
			want.ID = cur.ID
			tc.want(&want)
			want.Version, want.UpdatedAt = 4, ma.Time(now)
			if !reflect.DeepEqual(next, want) {
				a, _ := json.Marshal(next)
				b, _ := json.Marshal(want)
				t.Fatalf("next\n%s\nwant\n%s", a, b)
			}
			if b, _ := json.Marshal(cur); string(b) != string(keep) {
				t.Fatalf("Apply changed its cur:\n%s\nwas\n%s", b, keep)
			}
		})
	}
}

func TestApplyWithoutChangeMakesNoVersion(t *testing.T) {
	cur := current(t)
	for _, u := range []Update{
		{},
		{Name: Opt[string]{Set: true, Value: cur.Name}, Model: &cur.Model, Version: ptr(cur.Version)},
		{Tools: &[]ToolParam{agent, docsTS}},
		{MCPServers: &[]ma.MCPServer{docs}},
		{Skills: &[]SkillParam{{Type: "custom", SkillID: "skill_c", Version: ptr("latest")}}},
		{Multiagent: json.RawMessage("null"), ExecutionIdentity: json.RawMessage("null")},
	} {
		next, changed, err := apply(t, cur, u, time.Now())
		if err != nil || changed || !reflect.DeepEqual(next, cur) {
			t.Errorf("%+v: changed %v, err %v, next %+v", u, changed, err, next)
		}
	}
}

func TestApplyRefuses(t *testing.T) {
	archived := current(t)
	at := ma.Time(time.Now())
	archived.ArchivedAt = &at
	errMeta := errors.New("metadata: at most 16 keys")
	for _, tc := range []struct {
		name string
		cur  *ma.Agent
		u    Update
		kind Kind
		want string
	}{
		{"archived", &archived, Update{Name: Opt[string]{Set: true, Value: "x"}}, Conflict, "is archived and read-only"},
		{"archived, even unchanged", &archived, Update{}, Conflict, "is archived and read-only"},
		{"other version", nil, Update{Version: ptr(int64(2))}, Conflict, "version: the agent is at version 3, not 2"},
		{"name cleared", nil, Update{Name: Opt[string]{Set: true, Null: true}}, Invalid, "name: cannot be cleared"},
		{"name empty", nil, Update{Name: Opt[string]{Set: true}}, Invalid, "name: required"},
		{"description", nil, Update{Description: Opt[string]{Set: true, Value: strings.Repeat("d", 2049)}}, Invalid, "description: must be 0 to 2048"},
		{"system", nil, Update{System: Opt[string]{Set: true, Value: strings.Repeat("s", 100001)}}, Invalid, "system: must be 0 to 100000"},
		{"model", nil, Update{Model: &ma.ModelConfig{ID: "m", Speed: "warp"}}, Invalid, "model.speed: must be standard or fast"},
		{"servers leave a toolset without its server", nil, Update{MCPServers: new([]ma.MCPServer)}, Invalid,
			`tools[1].mcp_server_name: no MCP server named "docs" in mcp_servers`},
		{"tools leave a server unreferenced", nil, Update{Tools: &[]ToolParam{agent}}, Invalid, `mcp_servers: server "docs" is not referenced`},
		{"web tools of the new model", nil, Update{Model: &ma.ModelConfig{ID: "gpt-5"}, Tools: &[]ToolParam{{Type: ma.ToolTypeAgentToolset,
			Configs: []ToolConfigParam{{Name: "web_search"}}}}, MCPServers: new([]ma.MCPServer)}, Invalid, "web_search is not supported for gpt-5"},
		{"multiagent", nil, Update{Multiagent: json.RawMessage(`{"type":"coordinator"}`)}, Invalid, "multiagent.agents: required"},
		{"skills", nil, Update{Skills: &[]SkillParam{{Type: "custom"}}}, Invalid, "skills[0].skill_id: required"},
		// What needs no agent is checked first, by Prepare.
		{"skills before archived", &archived, Update{Skills: &[]SkillParam{{}}}, Invalid, "skills[0].type: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := current(t)
			if tc.cur != nil {
				cur = *tc.cur
			}
			next, changed, err := apply(t, cur, tc.u, time.Now())
			if changed || !reflect.DeepEqual(next, cur) {
				t.Errorf("refused change: changed %v, next %+v", changed, next)
			}
			wantRule(t, err, tc.kind, tc.want)
		})
	}
	// The hooks' errors come back as they are.
	if _, _, err := apply(t, current(t), Update{Model: &ma.ModelConfig{ID: "unserved-2"}}, time.Now()); !errors.Is(err, errNotServed) {
		t.Errorf("unserved model: %v", err)
	}
	u := Update{Metadata: func(ma.Metadata) (ma.Metadata, error) { return nil, errMeta }}
	if _, _, err := apply(t, current(t), u, time.Now()); err != errMeta {
		t.Errorf("bad metadata: %v", err)
	}
}
