package executorhub

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

// notifications collects the hub's process and terminal notifications.
type notifications struct {
	mu  sync.Mutex
	got []Notification
	ch  chan struct{}
}

func (n *notifications) add(x Notification) {
	n.mu.Lock()
	n.got = append(n.got, x)
	n.mu.Unlock()
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

func (n *notifications) wait(t *testing.T, method string, match func(json.RawMessage) bool) json.RawMessage {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		n.mu.Lock()
		for _, x := range n.got {
			if x.Method == method && match(x.Params) {
				n.mu.Unlock()
				return x.Params
			}
		}
		n.mu.Unlock()
		select {
		case <-n.ch:
		case <-deadline:
			t.Fatalf("no %s notification", method)
		}
	}
}

func TestProcessesAndTerminalsOverTheWire(t *testing.T) {
	notes := &notifications{ch: make(chan struct{}, 1)}
	f := newFixture(t, HubOptions{OnNotification: notes.add})
	f.client(executor.Options{})
	l := f.assign("s1", "bash")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	start := executor.ProcessStart{SessionID: "s1", ProcessID: "p1", Spec: executor.ProcessSpec{Argv: []string{"sh", "-c", "exit 7"}}}
	var info executor.ProcessInfo
	if err := l.Call(ctx, executor.MethodProcessStart, start, &info); err != nil || info.PID == 0 {
		t.Fatalf("process.start: %v %+v", err, info)
	}
	p := notes.wait(t, executor.MethodProcessExit, func(p json.RawMessage) bool { return strings.Contains(string(p), `"p1"`) })
	var exit executor.ProcessExit
	json.Unmarshal(p, &exit)
	if exit.ExitCode != 7 || exit.State != "exited" {
		t.Fatalf("process.exit = %+v", exit)
	}
	// Same id, same spec: the same process; another spec: mismatch.
	var again executor.ProcessInfo
	if err := l.Call(ctx, executor.MethodProcessStart, start, &again); err != nil || again.PID != info.PID {
		t.Fatalf("idempotent process.start: %v %+v", err, again)
	}
	start.Spec.Argv = []string{"true"}
	var re *executor.RPCError
	if err := l.Call(ctx, executor.MethodProcessStart, start, nil); !errors.As(err, &re) || re.Reason() != executor.ReasonProcessIDSpecMismatch {
		t.Fatalf("mismatch: %v", err)
	}
	err := l.Call(ctx, executor.MethodProcessStart, executor.ProcessStart{SessionID: "s1", ProcessID: "p2", Spec: executor.ProcessSpec{Argv: []string{"/no/such/program"}}}, nil)
	if !errors.As(err, &re) || re.Reason() != executor.ReasonSpawnFailed {
		t.Fatalf("spawn failure: %v", err)
	}

	var ref executor.TerminalRef
	if err := l.Call(ctx, executor.MethodTerminalOpen, executor.TerminalOpen{SessionID: "s1", Argv: []string{"cat"}, Cols: 80, Rows: 24}, &ref); err != nil {
		t.Fatalf("terminal.open: %v", err)
	}
	if err := l.Call(ctx, executor.MethodTerminalInput, executor.TerminalInput{SessionID: "s1", TerminalID: ref.TerminalID, Data: []byte("marco\n")}, nil); err != nil {
		t.Fatal(err)
	}
	notes.wait(t, executor.MethodTerminalOutput, func(p json.RawMessage) bool {
		var o executor.TerminalOutput
		json.Unmarshal(p, &o)
		return strings.Contains(string(o.Data), "marco")
	})
	if err := l.Call(ctx, executor.MethodTerminalClose, ref, nil); err != nil {
		t.Fatal(err)
	}
	notes.wait(t, executor.MethodTerminalExit, func(json.RawMessage) bool { return true })
	err = l.Call(ctx, executor.MethodTerminalInput, executor.TerminalInput{SessionID: "s1", TerminalID: "nope"}, nil)
	if !errors.As(err, &re) || re.Data == nil || re.Data.TerminalCode != "terminal_not_found" {
		t.Fatalf("unknown terminal: %v", err)
	}
}

func TestToolCancelAndTimeout(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ts := &testSessions{gate: make(chan struct{})}
	f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
	l := f.assign("s1", "block")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := l.CallTool(ctx, tool.Call{ID: "c1", Name: "block"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled CallTool = %v", err)
	}
	// tool.cancel stopped the tool; its result ("canceled") is collected by id.
	res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "block"})
	if err != nil || res.ErrorCode != "canceled" {
		t.Fatalf("result of the canceled call: %v %+v", err, res)
	}
	res, err = l.CallTool(context.Background(), tool.Call{ID: "c2", Name: "block", Timeout: 50 * time.Millisecond})
	if err != nil || res.ErrorCode != "timeout" {
		t.Fatalf("timed out call: %v %+v", err, res)
	}
	close(ts.gate)
}
