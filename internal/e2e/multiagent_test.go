package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// rosterKit is two saved agents a roster may name: w at version 2 and x
// at version 1.
type rosterKit struct {
	w, x *anthropic.BetaManagedAgentsAgent
}

func newRosterKit(t *testing.T, s *server) rosterKit {
	t.Helper()
	w := s.newAgent(t, "scripted")
	w, err := s.client.Beta.Agents.Update(context.Background(), w.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(1), System: anthropic.String("you write")})
	if err != nil {
		t.Fatal(err)
	}
	return rosterKit{w: w, x: s.newAgent(t, "scripted")}
}

// TestMultiagentCoordinator: through the official SDK, a coordinator's
// roster (an id, a pinned reference, self and an advisor) comes back
// pinned, reads back the same by get, list and versions list, and a session of
// it (with an override) holds the roster's full definitions, the override
// on the self entry only.
func TestMultiagentCoordinator(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	k := newRosterKit(t, s)
	c, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "coordinator", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsUnion{OfCoordinator: &anthropic.BetaManagedAgentsMultiagentCoordinatorParams{
			Agents: []anthropic.BetaManagedAgentsMultiagentRosterEntryParamsUnion{
				{OfString: anthropic.String(k.w.ID)},
				{OfBetaManagedAgentsAgent: &anthropic.BetaManagedAgentsAgentParams{ID: k.x.ID}},
				{OfBetaManagedAgentsMultiagentSelf: &anthropic.BetaManagedAgentsMultiagentSelfParams{}},
				{OfBetaManagedAgentsAdvisor: &anthropic.BetaManagedAgentsAdvisorParams{Model: "scripted"}},
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"coordinator","agents":[{"type":"agent","id":"` + k.w.ID + `","version":2},{"type":"agent","id":"` + k.x.ID + `","version":1},` +
		`{"type":"agent","id":"` + c.ID + `","version":1},{"type":"advisor","model":"scripted"}]}`
	if got := c.Multiagent.RawJSON(); got != want {
		t.Fatalf("multiagent\n got %s\nwant %s", got, want)
	}
	if a := c.Multiagent.Agents; c.Multiagent.Type != "coordinator" || len(a) != 4 || a[0].Version != 2 || a[2].ID != c.ID || a[3].Type != "advisor" || a[3].Model != "scripted" {
		t.Fatalf("SDK view %+v", c.Multiagent)
	}
	got, err := s.client.Beta.Agents.Get(ctx, c.ID, anthropic.BetaAgentGetParams{})
	if err != nil || got.Multiagent.RawJSON() != want {
		t.Fatalf("get: %s %v", got.Multiagent.RawJSON(), err)
	}
	vers, err := s.client.Beta.Agents.Versions.List(ctx, c.ID, anthropic.BetaAgentVersionListParams{})
	if err != nil || len(vers.Data) != 1 || vers.Data[0].Multiagent.RawJSON() != want {
		t.Fatalf("versions: %v %v", vers, err)
	}
	list, err := s.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, a := range list.Data {
		if a.ID == c.ID {
			listed = a.Multiagent.RawJSON() == want
		}
	}
	if !listed {
		t.Fatalf("list: %s", list.RawJSON())
	}
	env := s.newEnv(t, "multi")
	sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: env.ID, Agent: anthropic.BetaSessionNewParamsAgentUnion{
		OfBetaManagedAgentsAgentWithOverrides: &anthropic.BetaManagedAgentsAgentWithOverridesParams{ID: c.ID, System: anthropic.String("coordinate")}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*anthropic.BetaManagedAgentsSession{sess, must(s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{}))(t)} {
		m := s.Agent.Multiagent
		if m.Type != "coordinator" || len(m.Agents) != 4 {
			t.Fatalf("session multiagent %s", m.RawJSON())
		}
		w, x, self, adv := m.Agents[0], m.Agents[1], m.Agents[2], m.Agents[3]
		if w.Type != "agent" || w.ID != k.w.ID || w.Version != 2 || w.Name != "test agent" || w.System != "you write" || w.Model.ID != "scripted" {
			t.Errorf("w: %+v", w)
		}
		if x.ID != k.x.ID || x.Version != 1 || x.System != "" {
			t.Errorf("x: %+v", x)
		}
		if self.ID != c.ID || self.System != "coordinate" || self.Name != "coordinator" {
			t.Errorf("self (the coordinator, overridden): %+v", self)
		}
		if adv.Type != "advisor" || adv.Model.OfString != "scripted" {
			t.Errorf("advisor: %s", adv.RawJSON())
		}
		if strings.Contains(m.RawJSON(), `"multiagent"`) {
			t.Errorf("a roster entry repeats a roster: %s", m.RawJSON())
		}
	}
}

// must is v, failing t on err.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestMultiagent20261001: the defaults, the level-by-level merge of an
// update, null clearing, and the session snapshot of predefined agents.
func TestMultiagent20261001(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	k := newRosterKit(t, s)
	a, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "lead", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsUnion{OfMultiagent20261001: &anthropic.BetaManagedAgentsMultiagent20261001Params{
			Advisor: anthropic.BetaManagedAgentsMultiagentAdvisorParamsUnion{OfEnabled: &anthropic.BetaManagedAgentsMultiagentAdvisorEnabledParams{Model: "scripted"}},
			Subagents: anthropic.BetaManagedAgentsMultiagentSubagentsParamsUnion{OfEnabled: &anthropic.BetaManagedAgentsMultiagentSubagentsEnabledParams{
				InlineAgents:     anthropic.BetaManagedAgentsMultiagentInlineAgentsParamsUnion{OfDisabled: &anthropic.BetaManagedAgentsMultiagentInlineAgentsDisabledParams{}},
				PredefinedAgents: []anthropic.BetaManagedAgentsMultiagentPredefinedAgentParamsUnion{{OfString: anthropic.String(k.w.ID)}},
			}},
		}}}, option.WithJSONSet("multiagent.workflows", nil))
	if err != nil {
		t.Fatal(err)
	}
	m := a.Multiagent
	if m.Type != "multiagent_20261001" || m.Advisor.Type != "enabled" || m.Advisor.Model != "scripted" ||
		m.Subagents.Type != "enabled" || m.Subagents.InlineAgents.Type != "disabled" || len(m.Subagents.PredefinedAgents) != 1 ||
		m.Subagents.PredefinedAgents[0].ID != k.w.ID || m.Subagents.PredefinedAgents[0].Version != 2 ||
		m.Workflows.Type != "enabled" || m.Workflows.InlineAgents.Type != "enabled" || !strings.Contains(m.Workflows.RawJSON(), `"predefined_agents":[]`) {
		t.Fatalf("created %s", m.RawJSON())
	}
	// Same type merges: the predefined agents and the advisor stay.
	up, err := s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(1),
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsUnion{OfMultiagent20261001: &anthropic.BetaManagedAgentsMultiagent20261001Params{
			Subagents: anthropic.BetaManagedAgentsMultiagentSubagentsParamsUnion{OfEnabled: &anthropic.BetaManagedAgentsMultiagentSubagentsEnabledParams{
				InlineAgents: anthropic.BetaManagedAgentsMultiagentInlineAgentsParamsUnion{OfEnabled: &anthropic.BetaManagedAgentsMultiagentInlineAgentsEnabledParams{}}}},
			Workflows: anthropic.BetaManagedAgentsMultiagentWorkflowsParamsUnion{OfDisabled: &anthropic.BetaManagedAgentsMultiagentWorkflowsDisabledParams{}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	wantUp := `{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"scripted"},"subagents":{"type":"enabled","inline_agents":{"type":"enabled"},` +
		`"predefined_agents":[{"type":"agent","id":"` + k.w.ID + `","version":2}]},"workflows":{"type":"disabled"}}`
	if up.Version != 2 || up.Multiagent.RawJSON() != wantUp {
		t.Fatalf("merged v%d %s", up.Version, up.Multiagent.RawJSON())
	}
	// The session holds the predefined agents' full definitions.
	sess := s.newSession(t, a.ID, s.newEnv(t, "multi").ID)
	sub := sess.Agent.Multiagent.Subagents
	if sub.Type != "enabled" || len(sub.PredefinedAgents) != 1 || sub.PredefinedAgents[0].ID != k.w.ID || sub.PredefinedAgents[0].System != "you write" ||
		sub.PredefinedAgents[0].Version != 2 || sess.Agent.Multiagent.Workflows.Type != "disabled" || sess.Agent.Multiagent.Advisor.Model != "scripted" {
		t.Fatalf("session multiagent %s", sess.Agent.Multiagent.RawJSON())
	}
	// Omitted, it stays; null clears it.
	up, err = s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(2), System: anthropic.String("lead")})
	if err != nil || up.Multiagent.RawJSON() != wantUp {
		t.Fatalf("omitted: %v %v", up.Multiagent.RawJSON(), err)
	}
	up, err = s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(3)}, option.WithJSONSet("multiagent", nil))
	if err != nil || up.Version != 4 || !strings.Contains(up.RawJSON(), `"multiagent":null`) {
		t.Fatalf("cleared: v%d %s %v", up.Version, up.RawJSON(), err)
	}
}

// TestMultiagentRulesRefused: every rule of an agent's multiagent has a
// 400 naming it.
func TestMultiagentRulesRefused(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	k := newRosterKit(t, s)
	coord := must(s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "c", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}},
		option.WithJSONSet("multiagent", json.RawMessage(`{"type":"coordinator","agents":["`+k.x.ID+`"]}`))))(t)
	archived := s.newAgent(t, "scripted")
	if _, err := s.client.Beta.Agents.Archive(ctx, archived.ID, anthropic.BetaAgentArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	many := `"` + k.w.ID + `"` + strings.Repeat(`,"`+k.w.ID+`"`, 20)
	for _, tc := range []struct{ name, multiagent, want string }{
		{"type", `{"type":"swarm"}`, "multiagent.type: must be coordinator or multiagent_20261001"},
		{"roster of 1", `{"type":"coordinator","agents":[]}`, "a coordinator's roster holds 1 to 20 entries; got 0"},
		{"roster of 20", `{"type":"coordinator","agents":[` + many + `]}`, "a coordinator's roster holds 1 to 20 entries; got 21"},
		{"one self", `{"type":"coordinator","agents":[{"type":"self"},{"type":"self"}]}`, "at most one self entry"},
		{"one advisor", `{"type":"coordinator","agents":[{"type":"advisor","model":"scripted"},{"type":"advisor","model":"scripted"}]}`, "at most one advisor entry"},
		{"distinct", `{"type":"coordinator","agents":["` + k.w.ID + `",{"type":"agent","id":"` + k.w.ID + `","version":1}]}`, "entries must reference distinct agents"},
		{"exists", `{"type":"coordinator","agents":["agent_nope"]}`, "agent agent_nope not found; roster agents must exist in this agent's workspace"},
		{"version exists", `{"type":"coordinator","agents":[{"type":"agent","id":"` + k.x.ID + `","version":9}]}`, "has no version 9"},
		{"not archived", `{"type":"coordinator","agents":["` + archived.ID + `"]}`, "is archived; roster agents must not be archived"},
		{"depth 1", `{"type":"coordinator","agents":["` + coord.ID + `"]}`, "has multiagent set; roster agents must not (depth limit 1)"},
		{"advisor model permitted", `{"type":"coordinator","agents":[{"type":"advisor","model":"no-such-model"}]}`, "multiagent.agents[0].model"},
		{"advisor model 20261001", `{"type":"multiagent_20261001","advisor":{"type":"enabled","model":"no-such-model"}}`, "multiagent.advisor.model"},
		{"enabled advisor needs model", `{"type":"multiagent_20261001","advisor":{"type":"enabled"}}`, "an enabled advisor needs its model"},
		{"objects need their type", `{"type":"multiagent_20261001","subagents":{"predefined_agents":[]}}`, "multiagent.subagents.type: required (every object sent needs its type)"},
		{"predefined at most 20", `{"type":"multiagent_20261001","subagents":{"type":"enabled","predefined_agents":[` + many + `]}}`, "at most 20 predefined agents; got 21"},
		{"predefined not archived", `{"type":"multiagent_20261001","workflows":{"type":"enabled","predefined_agents":["` + archived.ID + `"]}}`, "roster agents must not be archived"},
		{"inline disabled needs predefined", `{"type":"multiagent_20261001","subagents":{"type":"enabled","inline_agents":{"type":"disabled"}}}`,
			"multiagent.subagents: inline_agents is disabled, so predefined_agents must name at least one agent"},
		{"unknown field", `{"type":"multiagent_20261001","teams":{}}`, "multiagent.teams: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "n", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}},
				option.WithJSONSet("multiagent", json.RawMessage(tc.multiagent)))
			apiErr(t, err, 400, "invalid_request_error")
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to name %q", err, tc.want)
			}
		})
	}
	// Roster agents are of the agent's workspace: another workspace's
	// developer cannot name them.
	ws := must(s.client.Organization.Workspaces.New(ctx, anthropic.OrganizationWorkspaceNewParams{Name: "elsewhere"}))(t)
	dev := s.developer(t, ws.ID, "dev-elsewhere", "developer")
	_, err := dev.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "n", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}},
		option.WithJSONSet("multiagent", json.RawMessage(`{"type":"coordinator","agents":["`+k.w.ID+`"]}`)))
	apiErr(t, err, 400, "invalid_request_error")
	if !strings.Contains(err.Error(), "roster agents must exist in this agent's workspace") {
		t.Fatalf("other workspace: %v", err)
	}
	// The merged result is validated: disabling inline agents of a
	// member with no predefined agents is refused on update too.
	lead := must(s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "l", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}},
		option.WithJSONSet("multiagent", json.RawMessage(`{"type":"multiagent_20261001"}`))))(t)
	_, err = s.client.Beta.Agents.Update(ctx, lead.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(1)},
		option.WithJSONSet("multiagent", json.RawMessage(`{"type":"multiagent_20261001","workflows":{"type":"enabled","inline_agents":{"type":"disabled"}}}`)))
	apiErr(t, err, 400, "invalid_request_error")
	if !strings.Contains(err.Error(), "multiagent.workflows: inline_agents is disabled") {
		t.Fatalf("merged: %v", err)
	}
	// A roster agent archived since refuses a new session.
	if _, err := s.client.Beta.Agents.Archive(ctx, k.x.ID, anthropic.BetaAgentArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: s.newEnv(t, "e").ID,
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(coord.ID)}})
	apiErr(t, err, 400, "invalid_request_error")
	if !strings.Contains(err.Error(), "agent.multiagent.agents[0]: roster agent "+k.x.ID+" is archived") {
		t.Fatalf("session: %v", err)
	}
}
