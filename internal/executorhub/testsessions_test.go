package executorhub

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/reinsdev/reins/executor"
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

func (s *testSessions) OpenSession(ctx context.Context, a executor.Assignment) (executor.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse != "" {
		return nil, executor.WithReason(executor.CodeResourceUnavailable, s.refuse, "refused by the test")
	}
	s.opened++
	return &testSession{s: s}, nil
}

type testSession struct{ s *testSessions }

func (t *testSession) CallTool(ctx context.Context, name string, input json.RawMessage) executor.ToolResult {
	t.s.runs.Add(1)
	if name == "block" {
		select {
		case <-t.s.gate:
		case <-ctx.Done():
			// The Go client's own answer to a call canceled or timed out.
			code, text := "canceled", "the tool call was canceled"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				code, text = "timeout", "the tool call timed out"
			}
			return executor.ToolResult{IsError: true, ErrorCode: code, Content: []executor.ContentBlock{executor.TextBlock(text)}}
		}
	}
	return executor.ToolResult{Content: []executor.ContentBlock{executor.TextBlock("ok " + name)}}
}

func (t *testSession) Close() error { return nil }

var testCaps = []string{"tool:noop", "tool:block"}
