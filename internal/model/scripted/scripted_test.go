package scripted

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/model"
)

type recordSink struct {
	thinking bool
	deltas   map[int]string
}

func (s *recordSink) Thinking() { s.thinking = true }
func (s *recordSink) TextDelta(i int, t string) {
	if s.deltas == nil {
		s.deltas = map[int]string{}
	}
	s.deltas[i] += t
}

func user(text string) model.Message {
	return model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: text}}}
}

func TestEchoAndDirectives(t *testing.T) {
	p := &Provider{}
	ctx := context.Background()
	sink := &recordSink{}
	resp, err := p.Stream(ctx, &model.Request{Model: "scripted", Messages: []model.Message{user("hello")}}, sink)
	if err != nil || resp.Content[0].Text != "You said: hello" || sink.deltas[0] != "You said: hello" || resp.StopReason != model.StopEndTurn {
		t.Fatalf("echo: %+v %v %q", resp, err, sink.deltas[0])
	}
	sink = &recordSink{}
	resp, err = p.Stream(ctx, &model.Request{Model: "scripted", Messages: []model.Message{user("@think\n@text a\n@tool t1 {\"x\":1}\n@tool t2\n@then done")}}, sink)
	if err != nil || !sink.thinking || len(resp.Content) != 3 || resp.StopReason != model.StopToolUse {
		t.Fatalf("directives: %+v %v", resp, err)
	}
	if resp.Content[1].Name != "t1" || string(resp.Content[1].Input) != `{"x":1}` || string(resp.Content[2].Input) != `{}` {
		t.Fatalf("tools %+v", resp.Content[1:])
	}
	// After the tool results: the @then text.
	msgs := []model.Message{user("@tool t1 {}\n@then done"), {Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "a", Name: "t1"}}},
		{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "a"}}}}
	resp, err = p.Stream(ctx, &model.Request{Model: "scripted", Messages: msgs}, &recordSink{})
	if err != nil || resp.Content[0].Text != "done" || resp.StopReason != model.StopEndTurn {
		t.Fatalf("after tools: %+v %v", resp, err)
	}
}

func TestFailuresCountPerCall(t *testing.T) {
	p := &Provider{}
	req := &model.Request{Model: "scripted", SessionID: "s", Messages: []model.Message{user("@fail rate_limited 2\n@text ok")}}
	for i := range 2 {
		_, err := p.Stream(context.Background(), req, &recordSink{})
		var me *model.Error
		if !errors.As(err, &me) || me.Kind != model.KindRateLimited || me.StatusCode != 429 || me.RetryAfter <= 0 {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
	}
	if resp, err := p.Stream(context.Background(), req, &recordSink{}); err != nil || resp.Content[0].Text != "ok" {
		t.Fatalf("third attempt: %v", err)
	}
}

func TestBadDirectivesAreInvalid(t *testing.T) {
	p := &Provider{}
	for _, text := range []string{"@nope", "@tool", "@tool x {bad", "@sleep soon", "@fail never", "@fail billing zero"} {
		_, err := p.Stream(context.Background(), &model.Request{Model: "scripted", Messages: []model.Message{user(text)}}, &recordSink{})
		var me *model.Error
		if !errors.As(err, &me) || me.Kind != model.KindInvalid {
			t.Fatalf("%q: %v", text, err)
		}
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := (&Provider{}).Stream(ctx, &model.Request{Model: "scripted", Messages: []model.Message{user("@sleep 1h")}}, &recordSink{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestNamedScripts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "demo.txt"), []byte("@tool look {}\n---\n@text seen it"), 0o600)
	p := &Provider{Dir: dir}
	resp, err := p.Stream(context.Background(), &model.Request{Model: "scripted/demo", Messages: []model.Message{user("anything")}}, &recordSink{})
	if err != nil || resp.Content[0].Name != "look" {
		t.Fatalf("first call: %+v %v", resp, err)
	}
	msgs := []model.Message{user("anything"), {Role: model.RoleAssistant, Content: resp.Content}, {Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: resp.Content[0].ID}}}}
	resp, err = p.Stream(context.Background(), &model.Request{Model: "scripted/demo", Messages: msgs}, &recordSink{})
	if err != nil || resp.Content[0].Text != "seen it" {
		t.Fatalf("second call: %+v %v", resp, err)
	}
	for _, name := range []string{"scripted/missing", "scripted/../etc", "scripted/.hidden"} {
		if _, err := p.Stream(context.Background(), &model.Request{Model: name, Messages: []model.Message{user("x")}}, &recordSink{}); err == nil {
			t.Fatalf("%s: no error", name)
		}
	}
}
