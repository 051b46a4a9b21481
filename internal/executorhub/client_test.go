package executorhub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

func TestToolCallRoundTrip(t *testing.T) {
	f := newFixture(t, HubOptions{})
	f.client(executor.Options{})
	l := f.assign("sess_1", "bash", "write", "read")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := l.CallTool(ctx, tool.Call{ID: "call_1", Name: "write", Input: input(map[string]any{"file_path": "a.txt", "content": "hello\n"})})
	if err != nil || res.IsError {
		t.Fatalf("write: %v %+v", err, res)
	}
	res, err = l.CallTool(ctx, tool.Call{ID: "call_2", Name: "bash", Input: input(map[string]any{"command": "cat a.txt; pwd"})})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].Text, "hello") {
		t.Fatalf("bash: %v %+v", err, res)
	}
	// The same id returns the same result without running again.
	res2, err := l.CallTool(ctx, tool.Call{ID: "call_2", Name: "bash", Input: input(map[string]any{"command": "echo other"})})
	if err != nil || res2.Content[0].Text != res.Content[0].Text {
		t.Fatalf("dedup: %v %+v", err, res2)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = l.CallTool(ctx, tool.Call{ID: "call_3", Name: "read", Input: input(map[string]any{"file_path": "a.txt"})})
	if !errorsIs(err, executor.ErrSessionEnded) {
		t.Fatalf("after release: %v", err)
	}
}
