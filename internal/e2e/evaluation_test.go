package e2e

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestToolUseEvaluation: each agent.tool_use carries the evaluation of the
// permission policy that produced its evaluated_permission, decoded by
// the official SDK: always_allow (allow), always_ask (ask), and auto,
// which reins, judging no call, evaluates to ask with reason code
// indeterminate.
func TestToolUseEvaluation(t *testing.T) {
	s := start(t, options{})
	ts := &anthropic.BetaManagedAgentsAgentToolset20260401Params{Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{
		{OfRead: &anthropic.BetaManagedAgentsReadToolConfigParams{PermissionPolicy: anthropic.BetaManagedAgentsReadToolConfigParamsPermissionPolicyUnion{
			OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}}}},
		{OfGlob: &anthropic.BetaManagedAgentsGlobToolConfigParams{PermissionPolicy: anthropic.BetaManagedAgentsGlobToolConfigParamsPermissionPolicyUnion{
			OfAuto: &anthropic.BetaManagedAgentsAutoPolicyParam{}}}},
	}}
	a := s.newAgent(t, "scripted", anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: ts})
	env := s.newEnv(t, "cloud")
	sess := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("@tool bash {\"command\":\"echo hi\"}\n@tool read {\"file_path\":\"/etc/hostname\"}\n@tool glob {\"pattern\":\"*\"}"))
	st.until(func(f frame) bool { return f.Type == "session.status_idle" })
	st.cancel()
	evs, err := s.client.Beta.Sessions.Events.List(context.Background(), sess.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ev := range evs.Data {
		if ev.Type != "agent.tool_use" {
			continue
		}
		u := ev.AsAgentToolUse()
		e := u.Evaluation
		switch u.Name {
		case "bash":
			_, ok := e.AsAny().(anthropic.BetaManagedAgentsAgentToolEvaluationAlwaysAllow)
			got["bash"] = string(u.EvaluatedPermission) + "/" + e.Type + "/" + boolWord(ok)
		case "read":
			_, ok := e.AsAny().(anthropic.BetaManagedAgentsAgentToolEvaluationAlwaysAsk)
			got["read"] = string(u.EvaluatedPermission) + "/" + e.Type + "/" + boolWord(ok)
		case "glob":
			auto := e.AsAuto()
			ask, ok := auto.EvaluatedPermission.AsAny().(anthropic.BetaManagedAgentsAgentAutoEvaluatedPermissionAsk)
			got["glob"] = string(u.EvaluatedPermission) + "/" + e.Type + "/" + boolWord(ok) + "/" + ask.ReasonCode
		}
	}
	want := map[string]string{"bash": "allow/always_allow/yes", "read": "ask/always_ask/yes", "glob": "ask/auto/yes/indeterminate"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
}

func boolWord(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
