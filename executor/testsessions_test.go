package executor

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
)

// testSessions is a SessionOpener with two tools: "noop" answers at once;
// "block" waits until gate is closed (or its context ends). runs counts
// the calls that started.
type testSessions struct {
	gate   chan struct{}
	runs   atomic.Int32
	mu     sync.Mutex
	refuse string // refuse assignments with this reason
	opened int
}

func (s *testSessions) setRefuse(r string) {
	s.mu.Lock()
	s.refuse = r
	s.mu.Unlock()
}

func (s *testSessions) OpenSession(ctx context.Context, a Assignment) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse != "" {
		return nil, WithReason(CodeResourceUnavailable, s.refuse, "refused by the test")
	}
	s.opened++
	return &testSession{s: s}, nil
}

type testSession struct{ s *testSessions }

func (t *testSession) CallTool(ctx context.Context, name string, input json.RawMessage) ToolResult {
	t.s.runs.Add(1)
	if name == "block" {
		select {
		case <-t.s.gate:
		case <-ctx.Done():
			return cancelResult(ctx)
		}
	}
	return ToolResult{Content: []ContentBlock{TextBlock("ok " + name)}}
}

func (t *testSession) Close() error { return nil }

var testCaps = []string{"tool:noop", "tool:block"}
