package anthropic_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
)

// TestServerTools: web_search and web_fetch are offered as Anthropic's
// server tools, their blocks come back in order with the exact JSON the API
// sent (the streamed input in place), and replaying the response sends
// those blocks back verbatim.
func TestServerTools(t *testing.T) {
	p, srv := newProvider(t)
	search := fakeanthropic.WebSearchResultBlock("srvtoolu_1",
		fakeanthropic.SearchResult{URL: "https://go.dev/doc", Title: "Go docs", EncryptedContent: "ENC1", PageAge: "2 days ago"})
	fetch := fakeanthropic.WebFetchResultBlock("srvtoolu_2", "https://go.dev/", "Go", "The Go programming language")
	srv.Push(fakeanthropic.Reply(
		fakeanthropic.TextBlock("Searching."),
		fakeanthropic.ServerToolUseBlock("srvtoolu_1", "web_search", `{"query":"go docs"}`),
		search,
		fakeanthropic.ServerToolUseBlock("srvtoolu_2", "web_fetch", `{"url":"https://go.dev/"}`),
		fetch,
		fakeanthropic.TextBlock("Found it."),
	).WithUsage(fakeanthropic.Usage{InputTokens: 10, OutputTokens: 5, WebSearchRequests: 1, WebFetchRequests: 1}))
	srv.Push(fakeanthropic.Text("ok"))

	req := userText("find the go docs")
	req.Tools = []model.Tool{{Name: "web_search", Server: anthropic.WebSearchTool}, {Name: "web_fetch", Server: anthropic.WebFetchTool}}
	resp, err := p.Stream(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, b := range resp.Content {
		types = append(types, string(b.Type))
	}
	if want := []string{"text", "server", "server", "server", "server", "text"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("blocks = %v, want %v", types, want)
	}
	if resp.Usage.WebSearchRequests != 1 || resp.Usage.WebFetchRequests != 1 {
		t.Errorf("usage = %+v, want one search and one fetch", resp.Usage)
	}
	use := resp.Content[1]
	if use.ID != "srvtoolu_1" || use.Name != "web_search" {
		t.Errorf("server tool use = %+v", use)
	}
	wantUse := map[string]any{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
		"input": map[string]any{"query": "go docs"}, "caller": map[string]any{"type": "direct"}}
	if got := decode(t, use.Raw); !reflect.DeepEqual(got, wantUse) {
		t.Errorf("server_tool_use raw = %v, want %v", got, wantUse)
	}
	if got := decode(t, resp.Content[2].Raw); !reflect.DeepEqual(got, roundTrip(t, search.Whole)) {
		t.Errorf("web_search_tool_result raw = %v, want %v", got, search.Whole)
	}
	if resp.Content[2].ToolUseID != "srvtoolu_1" {
		t.Errorf("result tool_use_id = %q", resp.Content[2].ToolUseID)
	}

	body := srv.Requests()[0].Body
	tools, _ := body["tools"].([]any)
	if len(tools) != 2 {
		t.Fatalf("tools = %v", body["tools"])
	}
	for i, want := range []string{"web_search_20250305", "web_fetch_20250910"} {
		tool := tools[i].(map[string]any)
		if tool["type"] != want || tool["name"] != []string{"web_search", "web_fetch"}[i] {
			t.Errorf("tools[%d] = %v, want type %s", i, tool, want)
		}
	}

	// The next call replays the response: the server blocks go back as
	// they came, in their place among the text.
	req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Content: resp.Content},
		model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: "thanks"}}})
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Requests()[1].Body["messages"].([]any)
	sent := msgs[1].(map[string]any)["content"].([]any)
	if len(sent) != 6 {
		t.Fatalf("assistant content sent = %v", sent)
	}
	for i, b := range resp.Content {
		if b.Type != model.BlockServer {
			continue
		}
		if got, want := sent[i], decode(t, b.Raw); !reflect.DeepEqual(got, want) {
			t.Errorf("replayed block %d = %v, want %v", i, got, want)
		}
	}
}

// TestPauseTurn: a paused turn of server tools is reported as such, for the
// harness to continue it.
func TestPauseTurn(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Reply(fakeanthropic.ServerToolUseBlock("srvtoolu_1", "web_search", `{"query":"x"}`)).WithStopReason("pause_turn"))
	resp, err := p.Stream(context.Background(), userText("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != model.StopPauseTurn {
		t.Errorf("stop reason = %q, want pause_turn", resp.StopReason)
	}
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func roundTrip(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, b)
}
