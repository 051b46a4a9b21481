package e2e

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/reinsdev/reins/internal/fakeanthropic"
)

// TestClaudeServerWebTools: for a Claude model, web_search and web_fetch
// are passed to the Messages API as Anthropic's server tools (whatever the
// environment's networking); the blocks the API returns are logged as
// agent.tool_use / agent.tool_result, which the official SDK decodes,
// counted in the session's usage, and replayed verbatim, in their order, on
// the next call.
func TestClaudeServerWebTools(t *testing.T) {
	s, fake := startWithFakeAnthropic(t)
	ctx := context.Background()
	agent := s.newAgent(t, "claude-sonnet-4-6", anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
		Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{
			{OfWebSearch: &anthropic.BetaManagedAgentsWebSearchToolConfigParams{Enabled: anthropic.Bool(true)}},
			{OfWebFetch: &anthropic.BetaManagedAgentsWebFetchToolConfigParams{Enabled: anthropic.Bool(true)}},
		},
	}})
	// Networking that lists no host: it does not govern server tools.
	env, err := s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{
		Name: "closed",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"example.com"}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.newSession(t, agent.ID, env.ID)

	search := fakeanthropic.WebSearchResultBlock("srvtoolu_01",
		fakeanthropic.SearchResult{URL: "https://go.dev/doc/", Title: "Documentation - The Go Programming Language", EncryptedContent: "EqkBCioIAhgB", PageAge: "3 days ago"})
	fetch := fakeanthropic.WebFetchResultBlock("srvtoolu_02", "https://go.dev/doc/", "Documentation", "The Go programming language is an open source project.")
	fake.Push(fakeanthropic.Reply(
		fakeanthropic.TextBlock("Let me search."),
		fakeanthropic.ServerToolUseBlock("srvtoolu_01", "web_search", `{"query":"go documentation"}`),
		search,
		fakeanthropic.ServerToolUseBlock("srvtoolu_02", "web_fetch", `{"url":"https://go.dev/doc/"}`),
		fetch,
		fakeanthropic.TextBlock("Go is open source."),
	).WithUsage(fakeanthropic.Usage{InputTokens: 100, OutputTokens: 20, WebSearchRequests: 1, WebFetchRequests: 1}))
	fake.Push(fakeanthropic.Text("You're welcome."))

	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("What is Go?"))
	if got := st.until(isIdle); got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("turn: %v", types(got))
	}
	st.cancel()

	// The first call offered the server tools.
	tools, _ := fake.Requests()[0].Body["tools"].([]any)
	var toolTypes []string
	for _, tl := range tools {
		typ, _ := tl.(map[string]any)["type"].(string)
		toolTypes = append(toolTypes, typ)
	}
	if !slices.Contains(toolTypes, "web_search_20250305") || !slices.Contains(toolTypes, "web_fetch_20250910") {
		t.Fatalf("tools offered: %v", toolTypes)
	}

	// The log, decoded by the official SDK.
	page, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	useIDs := map[string]string{} // tool name -> event id
	for _, ev := range page.Data {
		switch ev.Type {
		case "agent.message":
			seq = append(seq, "message:"+ev.AsAgentMessage().Content[0].Text)
		case "agent.tool_use":
			u := ev.AsAgentToolUse()
			if u.EvaluatedPermission != "allow" {
				t.Errorf("tool use %s: evaluated_permission %q", u.Name, u.EvaluatedPermission)
			}
			useIDs[u.Name] = u.ID
			seq = append(seq, "use:"+u.Name)
		case "agent.tool_result":
			r := ev.AsAgentToolResult()
			switch r.ToolUseID {
			case useIDs["web_search"]:
				c := r.Content[0]
				if c.Type != "search_result" || c.Source.OfString != "https://go.dev/doc/" || c.Title != "Documentation - The Go Programming Language" {
					t.Errorf("web_search result content: %s", r.RawJSON())
				}
				seq = append(seq, "result:web_search")
			case useIDs["web_fetch"]:
				c := r.Content[0]
				if c.Type != "document" || c.Source.Data != "The Go programming language is an open source project." {
					t.Errorf("web_fetch result content: %s", r.RawJSON())
				}
				seq = append(seq, "result:web_fetch")
			default:
				t.Errorf("result for unknown use %q", r.ToolUseID)
			}
		}
	}
	want := []string{"message:Let me search.", "use:web_search", "result:web_search", "use:web_fetch", "result:web_fetch", "message:Go is open source."}
	if !slices.Equal(seq, want) {
		t.Fatalf("log = %v, want %v", seq, want)
	}
	got, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if u := got.Usage.ServerToolUse; u.WebSearchRequests != 1 || u.WebFetchRequests != 1 {
		t.Errorf("usage.server_tool_use = %+v", u)
	}

	// The next call replays the assistant turn with the API's own blocks.
	s.send(t, sess.ID, userMessage("Thanks"))
	st = s.openStream(t, sess.ID)
	defer st.cancel()
	for len(fake.Requests()) < 2 {
		st.until(isIdle)
	}
	msgs := fake.Requests()[1].Body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages replayed: %v", msgs)
	}
	content := msgs[1].(map[string]any)["content"].([]any)
	var kinds []string
	for _, c := range content {
		kinds = append(kinds, c.(map[string]any)["type"].(string))
	}
	if want := []string{"text", "server_tool_use", "web_search_tool_result", "server_tool_use", "web_fetch_tool_result", "text"}; !slices.Equal(kinds, want) {
		t.Fatalf("assistant turn replayed as %v, want %v", kinds, want)
	}
	wantUse := map[string]any{"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
		"input": map[string]any{"query": "go documentation"}, "caller": map[string]any{"type": "direct"}}
	if !reflect.DeepEqual(content[1], wantUse) {
		t.Errorf("server_tool_use replayed as %v", content[1])
	}
	for i, blk := range map[int]fakeanthropic.Block{2: search, 4: fetch} {
		b, _ := json.Marshal(blk.Whole)
		var w any
		_ = json.Unmarshal(b, &w)
		if !reflect.DeepEqual(content[i], w) {
			t.Errorf("content[%d] replayed as %v, want %v", i, content[i], w)
		}
	}
}

// TestClaudePauseTurnContinues: a response the API paused (pause_turn)
// does not end the turn: the next call sends it back, ending with the
// assistant's turn, and the session idles once, after the final answer.
func TestClaudePauseTurnContinues(t *testing.T) {
	s, fake := startWithFakeAnthropic(t)
	agent := s.newAgent(t, "claude-sonnet-4-6", anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
		Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{{OfWebSearch: &anthropic.BetaManagedAgentsWebSearchToolConfigParams{}}},
	}})
	sess := s.newSession(t, agent.ID, s.newEnv(t, "env").ID)
	fake.Push(fakeanthropic.Reply(
		fakeanthropic.ServerToolUseBlock("srvtoolu_01", "web_search", `{"query":"long research"}`),
		fakeanthropic.WebSearchResultBlock("srvtoolu_01", fakeanthropic.SearchResult{URL: "https://example.com/", Title: "Example", EncryptedContent: "E1"}),
	).WithStopReason("pause_turn"))
	fake.Push(fakeanthropic.Text("Done researching."))

	st := s.openStream(t, sess.ID)
	defer st.cancel()
	s.send(t, sess.ID, userMessage("Research this"))
	got := st.until(isIdle)
	idles := 0
	for _, f := range got {
		if f.Type == "session.status_idle" {
			idles++
		}
	}
	if idles != 1 || got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("events: %v", types(got))
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	msgs := reqs[1].Body["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	content := last["content"].([]any)
	if last["role"] != "assistant" || len(content) != 2 || content[0].(map[string]any)["type"] != "server_tool_use" ||
		content[1].(map[string]any)["type"] != "web_search_tool_result" {
		t.Fatalf("the continuation sent %v", msgs)
	}
}
