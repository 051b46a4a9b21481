package e2e

import (
	"context"
	"sync"

	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// recordingTools is a tool.Runner that records calls and answers with
// the command it was given.
type recordingTools struct {
	mu    sync.Mutex
	calls []tool.Call
}

func (r *recordingTools) RunTool(_ context.Context, _ *ma.Session, call tool.Call) tool.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
	return tool.Result{Content: []ma.ContentBlock{{Type: "text", Text: "ran " + string(call.Input)}}}
}

func (r *recordingTools) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}
