package harness

import (
	"encoding/json"
	"fmt"

	"github.com/reinsdev/reins/internal/model"
	ma "github.com/reinsdev/reins/managedagents"
)

// serverEvent maps a server tool block of a model response to its event:
// a server_tool_use to an agent.tool_use (allowed: the API already ran
// it), a result to the agent.tool_result of that use. uses maps the API's
// tool use ids of the response to their event ids. Both events keep the
// block, which the transcript replays.
func serverEvent(b model.Block, uses map[string]string, now string) *ma.Event {
	var blk struct {
		Type    string          `json:"type"`
		Input   json.RawMessage `json:"input"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(b.Raw, &blk) // the provider checked it is a JSON object
	if blk.Type == "server_tool_use" {
		input := blk.Input
		if len(input) == 0 || string(input) == "null" {
			input = json.RawMessage(`{}`)
		}
		return &ma.Event{Type: ma.EventAgentToolUse, Name: b.Name, Input: ma.Raw(input), EvaluatedPermission: "allow",
			Evaluation: &ma.ToolEvaluation{Type: ma.PolicyAlwaysAllow}, ProcessedAt: &now, ServerBlock: ma.Raw(b.Raw)}
	}
	id := uses[b.ToolUseID]
	if id == "" {
		id = b.ToolUseID // its use came in an earlier response
	}
	content, isErr := serverResultContent(blk.Content)
	ev := &ma.Event{Type: ma.EventAgentToolResult, ToolUseID: id, Content: content, ProcessedAt: &now, ServerBlock: ma.Raw(b.Raw)}
	if isErr {
		ev.IsError = &isErr
	}
	return ev
}

// serverResultContent renders the content of a web_search_tool_result
// (search_result blocks) or web_fetch_tool_result (the fetched document)
// for the session log, and whether it is an error.
func serverResultContent(raw json.RawMessage) ([]ma.ContentBlock, bool) {
	var results []struct {
		URL     string `json:"url"`
		Title   string `json:"title"`
		PageAge string `json:"page_age"`
	}
	if json.Unmarshal(raw, &results) == nil {
		out := make([]ma.ContentBlock, 0, len(results))
		for _, r := range results {
			src, _ := json.Marshal(r.URL)
			text := r.Title
			if r.PageAge != "" {
				text += " (" + r.PageAge + ")"
			}
			out = append(out, ma.ContentBlock{Type: "search_result", Source: ma.Raw(src), Title: r.Title,
				Content: []ma.ContentBlock{{Type: "text", Text: text}}})
		}
		return out, false
	}
	var one struct {
		Type      string `json:"type"`
		ErrorCode string `json:"error_code"`
		URL       string `json:"url"`
		Content   struct {
			Type   string          `json:"type"`
			Title  string          `json:"title"`
			Source json.RawMessage `json:"source"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &one)
	if one.ErrorCode != "" {
		return []ma.ContentBlock{{Type: "text", Text: fmt.Sprintf("The tool failed: %s.", one.ErrorCode)}}, true
	}
	if one.Content.Type == "document" && len(one.Content.Source) > 0 {
		return []ma.ContentBlock{{Type: "document", Source: ma.Raw(one.Content.Source), Title: one.Content.Title, Context: one.URL}}, false
	}
	return []ma.ContentBlock{{Type: "text", Text: "Fetched " + one.URL}}, false
}
