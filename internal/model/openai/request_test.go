package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/fakeopenai"
	"github.com/reinsdev/reins/internal/model"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestTranscriptMapping(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeopenai.Text("ok"))
	req := &model.Request{
		Model:  "openai/qwen3-coder",
		System: "Be helpful.",
		Tools: []model.Tool{
			{Name: "read", Description: "Read a file", InputSchema: raw(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "now"},
		},
		Messages: []model.Message{
			{Role: model.RoleUser, Content: []model.Block{
				{Type: model.BlockText, Text: "Look at these."},
				{Type: model.BlockImage, Source: raw(`{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`)},
				{Type: model.BlockImage, Source: raw(`{"type":"url","url":"https://example.com/cat.jpg"}`)},
				{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}`), Title: "spec.pdf"},
				{Type: model.BlockDocument, Source: raw(`{"type":"text","media_type":"text/plain","data":"plain words"}`), Title: "Notes", Context: "draft"},
				{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"text/plain","data":"aGVsbG8="}`)},
			}},
			{Role: model.RoleAssistant, Content: []model.Block{
				{Type: model.BlockText, Text: "Reading."},
				{Type: model.BlockToolUse, ID: "call_1", Name: "read", Input: raw(`{"path":"a.txt"}`)},
				{Type: model.BlockToolUse, ID: "call_2", Name: "now"},
			}},
			{Role: model.RoleUser, Content: []model.Block{
				{Type: model.BlockToolResult, ToolUseID: "call_1", Content: []model.Block{
					{Type: model.BlockText, Text: "contents"},
					{Type: model.BlockImage, Source: raw(`{"type":"base64","media_type":"image/jpeg","data":"/9j/"}`)},
				}},
				{Type: model.BlockToolResult, ToolUseID: "call_2", IsError: true, Content: []model.Block{{Type: model.BlockText, Text: "no clock"}}},
				{Type: model.BlockText, Text: "Go on."},
			}},
			{Role: model.RoleAssistant, Content: []model.Block{
				{Type: model.BlockToolUse, ID: "call_3", Name: "now", Input: raw(`{}`)},
			}},
			{Role: model.RoleUser, Content: []model.Block{
				{Type: model.BlockToolResult, ToolUseID: "call_3", Content: []model.Block{{Type: model.BlockText, Text: "noon"}}},
			}},
		},
	}
	if _, err := p.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	b := srv.Requests()[0].Body
	if b["model"] != "qwen3-coder" {
		t.Errorf("model = %v", b["model"])
	}
	jsonEqual(t, "tools", b["tools"], `[
		{"type":"function","function":{"name":"read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},
		{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}}
	]`)
	jsonEqual(t, "messages", b["messages"], `[
		{"role":"system","content":"Be helpful."},
		{"role":"user","content":[
			{"type":"text","text":"Look at these."},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
			{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}},
			{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0x","filename":"spec.pdf"}},
			{"type":"text","text":"Document: Notes\nContext: draft\n\nplain words"},
			{"type":"text","text":"hello"}
		]},
		{"role":"assistant","content":"Reading.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.txt\"}"}},
			{"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}
		]},
		{"role":"tool","tool_call_id":"call_1","content":"contents\n(1 attachment(s) of this result follow in the next user message)"},
		{"role":"tool","tool_call_id":"call_2","content":"Error: no clock"},
		{"role":"user","content":[
			{"type":"text","text":"Attachments of the result of tool call call_1:"},
			{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/"}},
			{"type":"text","text":"Go on."}
		]},
		{"role":"assistant","tool_calls":[{"id":"call_3","type":"function","function":{"name":"now","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_3","content":"noon"}
	]`)
}

func TestUnsupportedSources(t *testing.T) {
	tests := []struct {
		name  string
		block model.Block
		want  string
	}{
		{"file image", model.Block{Type: model.BlockImage, Source: raw(`{"type":"file","file_id":"file_123"}`)}, `file "file_123"`},
		{"url document", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"url","url":"https://example.com/a.pdf"}`)}, "url documents"},
		{"docx", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"application/msword","data":"AA=="}`)}, "application/msword"},
		{"missing source", model.Block{Type: model.BlockImage}, "missing source"},
		{"unknown block", model.Block{Type: "video"}, `"video"`},
		{"bad text base64", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"base64","media_type":"text/plain","data":"%%%"}`)}, "not base64"},
		{"unknown document source", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"content"}`)}, `"content"`},
		{"file document", model.Block{Type: model.BlockDocument, Source: raw(`{"type":"file","file_id":"file_7"}`)}, `file "file_7"`},
		{"tool_use in user message", model.Block{Type: model.BlockToolUse, ID: "x", Name: "y"}, "tool_use"},
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
			if !strings.Contains(me.Message, tt.want) || !strings.HasPrefix(me.Message, "messages[0]: ") {
				t.Errorf("message = %q, want it to locate the block and mention %q", me.Message, tt.want)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("%d requests sent for an invalid transcript", n)
			}
		})
	}
}
