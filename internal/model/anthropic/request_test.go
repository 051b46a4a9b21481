package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/model"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// jsonEqual compares got (decoded JSON) with the JSON text want.
func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("%s =\n%s\nwant\n%s", what, g, want)
	}
}

func TestTranscriptMapping(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Text("ok"))
	req := &model.Request{
		Model:     "claude-opus-4-5",
		System:    "Be helpful.",
		MaxTokens: 1000,
		Effort:    "high",
		Speed:     "fast",
		Tools: []model.Tool{
			{Name: "read", Description: "Read a file", InputSchema: raw(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "bash", InputSchema: raw(`{"type":"object","properties":{"command":{"type":"string"}},"additionalProperties":false}`)},
		},
		Messages: []model.Message{
			{Role: model.RoleUser, Content: []model.Block{
				{Type: model.BlockText, Text: "Look at these."},
				{Type: model.BlockText, Text: ""},
				{Type: model.BlockImage, Source: raw(`{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`)},
				{Type: model.BlockImage, Source: raw(`{"type":"url","url":"https://example.com/cat.jpg"}`)},
				{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}`), Title: "Spec", Context: "v2"},
				{Type: model.BlockDocument, Source: raw(`{"type":"text","media_type":"text/plain","data":"plain words"}`)},
				{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"text/plain","data":"aGVsbG8="}`)},
				{Type: model.BlockDocument, Source: raw(`{"type":"url","url":"https://example.com/a.pdf"}`)},
			}},
			{Role: model.RoleAssistant, Content: []model.Block{
				{Type: model.BlockText, Text: "Reading."},
				{Type: model.BlockToolUse, ID: "toolu_1", Name: "read", Input: raw(`{"path":"a.txt"}`)},
				{Type: model.BlockToolUse, ID: "toolu_2", Name: "bash", Input: raw(`{"command":"ls"}`)},
			}},
			{Role: model.RoleUser, Content: []model.Block{
				{Type: model.BlockToolResult, ToolUseID: "toolu_1", Content: []model.Block{
					{Type: model.BlockText, Text: "contents"},
					{Type: model.BlockImage, Source: raw(`{"type":"base64","media_type":"image/jpeg","data":"/9j/"}`)},
				}},
				{Type: model.BlockToolResult, ToolUseID: "toolu_2", IsError: true, Content: []model.Block{
					{Type: model.BlockText, Text: "exit 1"},
				}},
			}},
		},
	}
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	b := r.Body
	if b["max_tokens"] != float64(1000) {
		t.Errorf("max_tokens = %v", b["max_tokens"])
	}
	jsonEqual(t, "output_config", b["output_config"], `{"effort":"high"}`)
	if b["speed"] != "fast" {
		t.Errorf("speed = %v", b["speed"])
	}
	if beta := r.Header.Get("Anthropic-Beta"); !strings.Contains(beta, "fast-mode") {
		t.Errorf("anthropic-beta = %q", beta)
	}
	jsonEqual(t, "system", b["system"], `[{"type":"text","text":"Be helpful.","cache_control":{"type":"ephemeral"}}]`)
	jsonEqual(t, "tools", b["tools"], `[
		{"name":"read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
		{"name":"bash","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"additionalProperties":false},"cache_control":{"type":"ephemeral"}}
	]`)
	jsonEqual(t, "messages", b["messages"], `[
		{"role":"user","content":[
			{"type":"text","text":"Look at these."},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
			{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
			{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"},"title":"Spec","context":"v2"},
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain words"}},
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hello"}},
			{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"},"cache_control":{"type":"ephemeral"}}
		]},
		{"role":"assistant","content":[
			{"type":"text","text":"Reading."},
			{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a.txt"}},
			{"type":"tool_use","id":"toolu_2","name":"bash","input":{"command":"ls"}}
		]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_1","content":[
				{"type":"text","text":"contents"},
				{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}
			]},
			{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"exit 1"}],
			 "cache_control":{"type":"ephemeral"}}
		]}
	]`)
}

func TestNoSystemNoTools(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Text("ok"))
	req := userText("hi")
	req.System = ""
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	b := srv.Requests()[0].Body
	for _, k := range []string{"system", "tools", "speed", "output_config"} {
		if _, ok := b[k]; ok {
			t.Errorf("%s sent: %v", k, b[k])
		}
	}
	jsonEqual(t, "messages", b["messages"], `[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]`)
}

func TestUnsupportedSources(t *testing.T) {
	tests := []struct {
		name  string
		block model.Block
		want  string
	}{
		{"file image", model.Block{Type: model.BlockImage, Source: raw(`{"type":"file","file_id":"file_123"}`)}, `file "file_123"`},
		{"file document", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"file","file_id":"file_9"}`)}, `file "file_9"`},
		{"docx base64", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"application/msword","data":"AA=="}`)}, "application/msword"},
		{"bad text base64", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"text/plain","data":"%%%"}`)}, "not base64"},
		{"no source", model.Block{Type: model.BlockImage}, "missing source"},
		{"source not object", model.Block{Type: model.BlockImage, Source: raw(`"x"`)}, "not a JSON object"},
		{"unknown image type", model.Block{Type: model.BlockImage, Source: raw(`{"type":"s3"}`)}, `"s3"`},
		{"base64 image without media type", model.Block{Type: model.BlockImage, Source: raw(`{"type":"base64","data":"AA=="}`)}, "media_type"},
		{"unknown block", model.Block{Type: "video"}, `"video"`},
		{"file in tool result", model.Block{Type: model.BlockToolResult, ToolUseID: "t", Content: []model.Block{{Type: model.BlockImage, Source: raw(`{"type":"file","file_id":"f"}`)}}}, "tool_result content[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newProvider(t)
			req := userText("hi")
			req.Messages[0].Content = append(req.Messages[0].Content, tt.block)
			_, err := p.Stream(context.Background(), req, nil)
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != model.KindInvalid {
				t.Fatalf("err = %v, want invalid", err)
			}
			if !strings.Contains(me.Message, tt.want) || !strings.HasPrefix(me.Message, "messages[0]: content[1]: ") {
				t.Errorf("message = %q, want it to locate the block and mention %q", me.Message, tt.want)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("%d requests sent for an invalid transcript", n)
			}
		})
	}
}

func TestBadToolSchema(t *testing.T) {
	p, _ := newProvider(t)
	req := userText("hi")
	req.Tools = []model.Tool{{Name: "x", InputSchema: raw(`[1]`)}}
	_, err := p.Stream(context.Background(), req, nil)
	if me := model.AsError(err); me.Kind != model.KindInvalid {
		t.Fatalf("err = %v, want invalid", err)
	}
}

func TestEmptyMessagesLeftOut(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Text("ok"))
	req := userText("hi")
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockText}}},
		model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: "still there?"}}},
	)
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "messages", srv.Requests()[0].Body["messages"], `[
		{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},
		{"role":"user","content":[{"type":"text","text":"still there?","cache_control":{"type":"ephemeral"}}]}
	]`)
}

func TestCacheBreakpointsAcrossTurns(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Text("ok"))
	text := func(role model.Role, s string) model.Message {
		return model.Message{Role: role, Content: []model.Block{{Type: model.BlockText, Text: s}}}
	}
	req := userText("one")
	req.Messages = append(req.Messages, text(model.RoleAssistant, "two"), text(model.RoleUser, "three"),
		text(model.RoleAssistant, "four"), text(model.RoleUser, "five"))
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	// Breakpoints: the end of the transcript and the end of the previous
	// user message ("three"); earlier ones are left alone (at most 4).
	jsonEqual(t, "messages", srv.Requests()[0].Body["messages"], `[
		{"role":"user","content":[{"type":"text","text":"one"}]},
		{"role":"assistant","content":[{"type":"text","text":"two"}]},
		{"role":"user","content":[{"type":"text","text":"three","cache_control":{"type":"ephemeral"}}]},
		{"role":"assistant","content":[{"type":"text","text":"four"}]},
		{"role":"user","content":[{"type":"text","text":"five","cache_control":{"type":"ephemeral"}}]}
	]`)
}

func TestToolResultWithDocument(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Text("ok"))
	req := userText("hi")
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "toolu_1", Name: "fetch"}}},
		model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "toolu_1", Content: []model.Block{
			{Type: model.BlockText, Text: ""},
			{Type: model.BlockDocument, Source: raw(`{"type":"text","data":"page"}`), Title: "Page"},
		}}}},
	)
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Requests()[0].Body["messages"].([]any)
	jsonEqual(t, "assistant", msgs[1], `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"fetch","input":{}}]}`)
	jsonEqual(t, "tool result", msgs[2], `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","cache_control":{"type":"ephemeral"},
		"content":[{"type":"document","title":"Page","source":{"type":"text","media_type":"text/plain","data":"page"}}]}]}`)

	req.Messages[2].Content[0].Content = []model.Block{{Type: model.BlockToolUse}}
	if _, err := p.Stream(context.Background(), req, nil); model.AsError(err).Kind != model.KindInvalid {
		t.Errorf("tool_use inside a tool result: err = %v, want invalid", err)
	}
}
