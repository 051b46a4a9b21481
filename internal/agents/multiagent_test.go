package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// roster are the agents a roster may reference, by id, every version:
// agent_w at versions 1 and 2, agent_x, agent_arch (archived) and
// agent_multi (itself a coordinator).
var roster = func() map[string][]ma.Agent {
	agent := func(id string, v int64) ma.Agent {
		return ma.Agent{ID: id, Type: "agent", Name: id + " v" + fmt.Sprint(v), System: "sys " + id, Model: ma.ModelConfig{ID: "claude-sonnet-4-5"},
			Tools: []ma.Tool{}, MCPServers: []ma.MCPServer{}, Skills: []ma.SkillRef{}, Multiagent: ma.Raw("null"), Version: v}
	}
	archived := agent("agent_arch", 1)
	archived.ArchivedAt = ptr("2026-01-02T00:00:00Z")
	multi := agent("agent_multi", 1)
	multi.Multiagent = ma.Raw(`{"type":"coordinator","agents":[{"type":"agent","id":"agent_x","version":1}]}`)
	return map[string][]ma.Agent{
		"agent_w": {agent("agent_w", 1), agent("agent_w", 2)}, "agent_x": {agent("agent_x", 1)},
		"agent_arch": {archived}, "agent_multi": {multi},
	}
}()

func findRoster(_ context.Context, id string, version int64) (ma.Agent, bool, error) {
	vs := roster[id]
	if len(vs) == 0 {
		return ma.Agent{}, false, nil
	}
	if version == 0 {
		return vs[len(vs)-1], true, nil
	}
	for _, a := range vs {
		if a.Version == version {
			return a, true, nil
		}
	}
	return ma.Agent{}, false, nil
}

// newMulti creates an agent with multiagent raw.
func newMulti(t *testing.T, raw string) (ma.Agent, error) {
	t.Helper()
	name := "coord"
	return testRules().New(t.Context(), Create{Name: &name, Model: ma.ModelConfig{ID: "claude-opus-4-1"}, Multiagent: json.RawMessage(raw)}, time.Now())
}

// wantJSON fails unless got is the JSON want, with id standing for the
// agent's own id.
func wantJSON(t *testing.T, got ma.Raw, id, want string) {
	t.Helper()
	want = strings.ReplaceAll(want, "SELF", id)
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("multiagent\n got %s\nwant %s", ja, jb)
	}
}

const (
	// defaults20261001 is multiagent_20261001 with every member default.
	defaultMembersJSON = `{"type":"enabled","inline_agents":{"type":"enabled"},"predefined_agents":[]}`
	defaults20261001   = `{"type":"multiagent_20261001","advisor":{"type":"disabled"},"subagents":` + defaultMembersJSON + `,"workflows":` + defaultMembersJSON + `}`
)

func TestMultiagentCreate(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"none", `null`, `null`},
		{"coordinator",
			`{"type":"coordinator","agents":["agent_w",{"type":"agent","id":"agent_x","version":null},{"type":"self"},{"type":"advisor","model":"claude-haiku-4-5"}]}`,
			`{"type":"coordinator","agents":[{"type":"agent","id":"agent_w","version":2},{"type":"agent","id":"agent_x","version":1},{"type":"agent","id":"SELF","version":1},{"type":"advisor","model":"claude-haiku-4-5"}]}`},
		{"coordinator keeps an older version", `{"type":"coordinator","agents":[{"type":"agent","id":"agent_w","version":1}]}`,
			`{"type":"coordinator","agents":[{"type":"agent","id":"agent_w","version":1}]}`},
		{"defaults", `{"type":"multiagent_20261001"}`, defaults20261001},
		{"null members take their defaults", `{"type":"multiagent_20261001","advisor":null,"subagents":null,"workflows":null}`, defaults20261001},
		{"members", `{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},
			"subagents":{"type":"enabled","inline_agents":{"type":"disabled"},"predefined_agents":["agent_w",{"type":"self"}]},
			"workflows":{"type":"disabled"}}`,
			`{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},
			"subagents":{"type":"enabled","inline_agents":{"type":"disabled"},"predefined_agents":[{"type":"agent","id":"agent_w","version":2},{"type":"agent","id":"SELF","version":1}]},
			"workflows":{"type":"disabled"}}`},
		{"predefined null is empty", `{"type":"multiagent_20261001","workflows":{"type":"enabled","predefined_agents":null,"inline_agents":null}}`, defaults20261001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := newMulti(t, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON(t, a.Multiagent, a.ID, tc.want)
		})
	}
}

func TestMultiagentRefuses(t *testing.T) {
	many := `"agent_w"` + strings.Repeat(`,"agent_w"`, MaxRoster)
	for _, tc := range []struct{ name, in, want string }{
		{"not an object", `[]`, "multiagent: must be an object"},
		{"type required", `{}`, "multiagent.type: required (every object sent needs its type)"},
		{"type unknown", `{"type":"swarm"}`, "multiagent.type: must be coordinator or multiagent_20261001"},
		{"unknown field", `{"type":"coordinator","agents":["agent_w"],"depth":2}`, "multiagent.depth: unknown field"},
		{"roster required", `{"type":"coordinator"}`, "multiagent.agents: required"},
		{"roster empty", `{"type":"coordinator","agents":[]}`, "multiagent.agents: a coordinator's roster holds 1 to 20 entries; got 0"},
		{"roster too long", `{"type":"coordinator","agents":[` + many + `]}`, "multiagent.agents: a coordinator's roster holds 1 to 20 entries; got 21"},
		{"two selves", `{"type":"coordinator","agents":[{"type":"self"},{"type":"self"}]}`, "multiagent.agents[1]: at most one self entry"},
		{"two advisors", `{"type":"coordinator","agents":[{"type":"advisor","model":"a"},{"type":"advisor","model":"b"}]}`, "multiagent.agents[1]: at most one advisor entry"},
		{"distinct", `{"type":"coordinator","agents":["agent_w",{"type":"agent","id":"agent_w","version":1}]}`,
			"multiagent.agents[1]: entries must reference distinct agents (after resolving self and agent ids); multiagent.agents[0] names agent_w too"},
		{"exists", `{"type":"coordinator","agents":["agent_nope"]}`, "multiagent.agents[0]: agent agent_nope not found; roster agents must exist in this agent's workspace"},
		{"version exists", `{"type":"coordinator","agents":[{"type":"agent","id":"agent_w","version":7}]}`, "multiagent.agents[0].version: agent agent_w has no version 7"},
		{"version a number", `{"type":"coordinator","agents":[{"type":"agent","id":"agent_w","version":0}]}`, "multiagent.agents[0].version: must be a version number"},
		{"id required", `{"type":"coordinator","agents":[{"type":"agent"}]}`, "multiagent.agents[0].id: required"},
		{"not archived", `{"type":"coordinator","agents":["agent_arch"]}`, "multiagent.agents[0]: agent agent_arch is archived; roster agents must not be archived"},
		{"depth 1", `{"type":"coordinator","agents":["agent_multi"]}`, "multiagent.agents[0]: agent agent_multi version 1 has multiagent set; roster agents must not (depth limit 1)"},
		{"advisor model served", `{"type":"coordinator","agents":[{"type":"advisor","model":"unserved-1"}]}`, ""},
		{"advisor model required", `{"type":"coordinator","agents":[{"type":"advisor"}]}`, "multiagent.agents[0].model: required"},
		{"entry type", `{"type":"coordinator","agents":[{"type":"team"}]}`, "multiagent.agents[0].type: must be an agent id, agent, self or advisor"},
		{"no advisor among predefined agents", `{"type":"multiagent_20261001","subagents":{"type":"enabled","predefined_agents":[{"type":"advisor","model":"m"}]}}`,
			"multiagent.subagents.predefined_agents[0].type: must be an agent id, agent or self"},
		{"predefined at most 20", `{"type":"multiagent_20261001","workflows":{"type":"enabled","predefined_agents":[` + many + `]}}`,
			"multiagent.workflows.predefined_agents: at most 20 predefined agents; got 21"},
		{"predefined distinct", `{"type":"multiagent_20261001","subagents":{"type":"enabled","predefined_agents":["agent_x","agent_x"]}}`,
			"multiagent.subagents.predefined_agents[1]: entries must reference distinct agents"},
		{"predefined not archived", `{"type":"multiagent_20261001","workflows":{"type":"enabled","predefined_agents":["agent_arch"]}}`,
			"multiagent.workflows.predefined_agents[0]: agent agent_arch is archived"},
		{"predefined depth 1", `{"type":"multiagent_20261001","subagents":{"type":"enabled","predefined_agents":["agent_multi"]}}`,
			"has multiagent set; roster agents must not (depth limit 1)"},
		{"inline disabled needs predefined", `{"type":"multiagent_20261001","subagents":{"type":"enabled","inline_agents":{"type":"disabled"}}}`,
			"multiagent.subagents: inline_agents is disabled, so predefined_agents must name at least one agent"},
		{"inline disabled needs predefined (workflows)", `{"type":"multiagent_20261001","workflows":{"type":"enabled","inline_agents":{"type":"disabled"},"predefined_agents":[]}}`,
			"multiagent.workflows: inline_agents is disabled, so predefined_agents must name at least one agent"},
		{"member type required", `{"type":"multiagent_20261001","subagents":{}}`, "multiagent.subagents.type: required (every object sent needs its type)"},
		{"member type", `{"type":"multiagent_20261001","workflows":{"type":"on"}}`, "multiagent.workflows.type: must be enabled or disabled"},
		{"inline type required", `{"type":"multiagent_20261001","subagents":{"type":"enabled","inline_agents":{}}}`, "multiagent.subagents.inline_agents.type: required"},
		{"disabled member takes no keys", `{"type":"multiagent_20261001","subagents":{"type":"disabled","predefined_agents":[]}}`, "multiagent.subagents.predefined_agents: unknown field"},
		{"advisor type required", `{"type":"multiagent_20261001","advisor":{"model":"m"}}`, "multiagent.advisor.type: required"},
		{"enabled advisor needs its model", `{"type":"multiagent_20261001","advisor":{"type":"enabled"}}`, "multiagent.advisor.model: required: an enabled advisor needs its model"},
		{"advisor model permitted", `{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"unserved-2"}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newMulti(t, tc.in)
			if tc.want == "" { // the model hook's error comes back as it is
				if err == nil || !strings.Contains(err.Error(), "model: not served") {
					t.Fatalf("error %v, want the model hook's", err)
				}
				return
			}
			wantRule(t, err, Invalid, tc.want)
		})
	}
}

// coordinatorAt is an agent at version 3 whose multiagent is raw, given
// at creation.
func coordinatorAt(t *testing.T, raw string) ma.Agent {
	t.Helper()
	a, err := newMulti(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	if a.Multiagent, err = repinSelf(a.Multiagent, a.ID, 1, 3); err != nil { // self follows the version
		t.Fatal(err)
	}
	a.Version = 3
	return a
}

func TestMultiagentMerge(t *testing.T) {
	const stored = `{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},
		"subagents":{"type":"enabled","inline_agents":{"type":"disabled"},"predefined_agents":[{"type":"agent","id":"agent_x","version":1}]},
		"workflows":{"type":"disabled"}}`
	const storedSubagents = `{"type":"enabled","inline_agents":{"type":"disabled"},"predefined_agents":[{"type":"agent","id":"agent_x","version":1}]}`
	for _, tc := range []struct{ name, update, want string }{
		{"only the type changes nothing", `{"type":"multiagent_20261001"}`, ""},
		{"omitted keys keep their values", `{"type":"multiagent_20261001","advisor":{"type":"disabled"}}`,
			`{"type":"multiagent_20261001","advisor":{"type":"disabled"},"subagents":` + storedSubagents + `,"workflows":{"type":"disabled"}}`},
		{"same type merges", `{"type":"multiagent_20261001","subagents":{"type":"enabled","inline_agents":{"type":"enabled"}}}`,
			`{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},
			"subagents":{"type":"enabled","inline_agents":{"type":"enabled"},"predefined_agents":[{"type":"agent","id":"agent_x","version":1}]},"workflows":{"type":"disabled"}}`},
		{"a sent list replaces", `{"type":"multiagent_20261001","subagents":{"type":"enabled","predefined_agents":["agent_w",{"type":"self"}]}}`,
			`{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},
			"subagents":{"type":"enabled","inline_agents":{"type":"disabled"},"predefined_agents":[{"type":"agent","id":"agent_w","version":2},{"type":"agent","id":"SELF","version":4}]},"workflows":{"type":"disabled"}}`},
		{"another type replaces with defaults", `{"type":"multiagent_20261001","workflows":{"type":"enabled"}}`,
			`{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},"subagents":` + storedSubagents + `,"workflows":` + defaultMembersJSON + `}`},
		{"null takes the default", `{"type":"multiagent_20261001","workflows":null,"subagents":null,"advisor":null}`, defaults20261001},
		{"disabled", `{"type":"multiagent_20261001","subagents":{"type":"disabled"}}`,
			`{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},"subagents":{"type":"disabled"},"workflows":{"type":"disabled"}}`},
		{"a coordinator replaces", `{"type":"coordinator","agents":["agent_x"]}`, `{"type":"coordinator","agents":[{"type":"agent","id":"agent_x","version":1}]}`},
		{"null clears", `null`, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := coordinatorAt(t, stored)
			next, changed, err := apply(t, cur, Update{ID: cur.ID, Multiagent: json.RawMessage(tc.update)}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if changed {
					t.Fatalf("changed: %s", next.Multiagent)
				}
				return
			}
			if !changed || next.Version != 4 {
				t.Fatalf("changed %v version %d", changed, next.Version)
			}
			wantJSON(t, next.Multiagent, cur.ID, tc.want)
		})
	}
}

func TestMultiagentMergeValidatesTheResult(t *testing.T) {
	cur := coordinatorAt(t, `{"type":"multiagent_20261001","subagents":{"type":"enabled","inline_agents":{"type":"disabled"},"predefined_agents":["agent_x"]}}`)
	_, _, err := apply(t, cur, Update{ID: cur.ID, Multiagent: json.RawMessage(`{"type":"multiagent_20261001","subagents":{"type":"enabled","predefined_agents":[]}}`)}, time.Now())
	wantRule(t, err, Invalid, "multiagent.subagents: inline_agents is disabled, so predefined_agents must name at least one agent")
	// A stored coordinator is replaced: the defaults, not its roster, fill in.
	cur = coordinatorAt(t, `{"type":"coordinator","agents":["agent_x"]}`)
	next, _, err := apply(t, cur, Update{ID: cur.ID, Multiagent: json.RawMessage(`{"type":"multiagent_20261001"}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, next.Multiagent, cur.ID, defaults20261001)
}

func TestMultiagentSelfFollowsTheAgent(t *testing.T) {
	cur := coordinatorAt(t, `{"type":"coordinator","agents":[{"type":"self"},"agent_x"]}`)
	// The agent's own id is self too: distinct from {"type":"self"}.
	_, _, err := apply(t, cur, Update{ID: cur.ID, Multiagent: json.RawMessage(`{"type":"coordinator","agents":[{"type":"self"},"` + cur.ID + `"]}`)}, time.Now())
	wantRule(t, err, Invalid, "multiagent.agents[1]: entries must reference distinct agents")
	// Sending the same roster again changes nothing.
	if _, changed, err := apply(t, cur, Update{ID: cur.ID, Multiagent: json.RawMessage(`{"type":"coordinator","agents":["` + cur.ID + `","agent_x"]}`)}, time.Now()); err != nil || changed {
		t.Fatalf("same roster: changed %v, %v", changed, err)
	}
	// Another change leaves the roster as it is, self pinned to the new version.
	next, changed, err := apply(t, cur, Update{Name: Opt[string]{Set: true, Value: "renamed"}}, time.Now())
	if err != nil || !changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	wantJSON(t, next.Multiagent, cur.ID, `{"type":"coordinator","agents":[{"type":"agent","id":"SELF","version":4},{"type":"agent","id":"agent_x","version":1}]}`)
}

func TestMultiagentAccessors(t *testing.T) {
	var none *Multiagent
	if none.Delegates() != nil || none.SubagentsEnabled() || none.InlineAgents() || none.WorkflowsEnabled() {
		t.Error("nil multiagent grants something")
	}
	if _, ok := none.AdvisorModel(); ok {
		t.Error("nil multiagent has an advisor")
	}
	c, err := newMulti(t, `{"type":"coordinator","agents":["agent_x",{"type":"self"},{"type":"advisor","model":"claude-haiku-4-5"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMultiagent(c.Multiagent, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	d := m.Delegates()
	if len(d) != 2 || d[0].ID != "agent_x" || d[0].Version != 1 || d[0].Self || !d[1].Self || d[1].ID != c.ID {
		t.Errorf("coordinator delegates %+v", d)
	}
	if model, ok := m.AdvisorModel(); !ok || model != "claude-haiku-4-5" || !m.SubagentsEnabled() || m.InlineAgents() || m.WorkflowsEnabled() {
		t.Errorf("coordinator: advisor %q %v subagents %v inline %v workflows %v", model, ok, m.SubagentsEnabled(), m.InlineAgents(), m.WorkflowsEnabled())
	}
	n, err := newMulti(t, `{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"claude-opus-4-1"},"subagents":{"type":"enabled","predefined_agents":["agent_w"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if m, err = ParseMultiagent(n.Multiagent, n.ID); err != nil {
		t.Fatal(err)
	}
	if d := m.Delegates(); len(d) != 1 || d[0].ID != "agent_w" || d[0].Version != 2 {
		t.Errorf("delegates %+v", d)
	}
	if model, ok := m.AdvisorModel(); !ok || model != "claude-opus-4-1" || !m.SubagentsEnabled() || !m.InlineAgents() || !m.WorkflowsEnabled() {
		t.Errorf("multiagent_20261001: advisor %q %v inline %v workflows %v", model, ok, m.InlineAgents(), m.WorkflowsEnabled())
	}
	if m, _ = ParseMultiagent(json.RawMessage(`{"type":"multiagent_20261001","advisor":{"type":"disabled"},"subagents":{"type":"disabled"},"workflows":{"type":"disabled"}}`), "x"); m.Delegates() != nil || m.SubagentsEnabled() || m.InlineAgents() || m.WorkflowsEnabled() {
		t.Errorf("disabled members grant something: %+v", m)
	}
}

func TestSnapshot(t *testing.T) {
	c, err := newMulti(t, `{"type":"coordinator","agents":[{"type":"agent","id":"agent_w","version":1},{"type":"self"},{"type":"advisor","model":"claude-haiku-4-5"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	// The session overrides the agent's system prompt: its self entry has it too.
	sa := ma.SessionAgent{ID: c.ID, Type: "agent", Name: c.Name, System: "overridden", Model: c.Model, Tools: c.Tools, MCPServers: c.MCPServers,
		Skills: c.Skills, Multiagent: c.Multiagent, Version: 1}
	raw, err := testRules().Snapshot(t.Context(), sa)
	if err != nil {
		t.Fatal(err)
	}
	m, err := SessionMultiagent(ma.SessionAgent{ID: c.ID, Multiagent: raw})
	if err != nil {
		t.Fatal(err)
	}
	d := m.Delegates()
	if len(d) != 2 || d[0].Definition == nil || d[0].Definition.Name != "agent_w v1" || d[0].Definition.System != "sys agent_w" ||
		d[1].Definition == nil || !d[1].Self || d[1].Definition.System != "overridden" || d[1].Definition.Version != 1 {
		t.Fatalf("snapshot %s", raw)
	}
	if !strings.Contains(string(raw), `{"type":"advisor","model":"claude-haiku-4-5"}`) || strings.Contains(string(raw), `"multiagent"`) {
		t.Errorf("snapshot %s", raw)
	}
	// A roster agent archived since refuses the session.
	sa.Multiagent = ma.Raw(`{"type":"multiagent_20261001","advisor":{"type":"disabled"},"subagents":{"type":"enabled","inline_agents":{"type":"enabled"},"predefined_agents":[{"type":"agent","id":"agent_arch","version":1}]},"workflows":{"type":"disabled"}}`)
	_, err = testRules().Snapshot(t.Context(), sa)
	wantRule(t, err, Invalid, "agent.multiagent.subagents.predefined_agents[0]: roster agent agent_arch is archived; new sessions cannot use it")
	// No multiagent, no snapshot of one.
	sa.Multiagent = ma.Raw("null")
	if raw, err := testRules().Snapshot(t.Context(), sa); err != nil || string(raw) != "null" {
		t.Errorf("null: %s, %v", raw, err)
	}
}
