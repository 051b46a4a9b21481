package executorhub

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

// runExecutorProcess is an executor in a child process, killed by the test.
func runExecutorProcess() {
	c := executor.NewClient(executor.Options{
		URL:            os.Getenv("REINS_TEST_URL"),
		EnvironmentKey: os.Getenv("REINS_TEST_KEY"),
		Workspace:      os.Getenv("REINS_TEST_WORKSPACE"),
		Executor:       executor.ExecutorInfo{Name: "child"},
	})
	c.Run(context.Background())
	os.Exit(3)
}

func TestExecutorProcessKilledMidTool(t *testing.T) {
	const ttl = 2 * time.Second
	f := newFixture(t, HubOptions{LeaseTTL: ttl, HeartbeatInterval: 300 * time.Millisecond})
	ws := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REINS_TEST_EXECUTOR_PROCESS=1", "REINS_TEST_URL="+f.srv.URL,
		"REINS_TEST_KEY="+f.envKey, "REINS_TEST_WORKSPACE="+ws)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lease := f.assign("s1", "bash")
	errc := make(chan error, 1)
	go func() {
		_, err := lease.CallTool(context.Background(), tool.Call{ID: "c1", Name: "bash", Input: input(map[string]any{"command": "touch started; sleep 5"})})
		errc <- err
	}()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(ws, "s1", "started")); return err == nil })
	if err := cmd.Process.Kill(); err != nil { // SIGKILL mid-tool
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrToolOutcomeUnknown) {
			t.Fatalf("CallTool = %v, want ErrToolOutcomeUnknown", err)
		}
		if d := time.Since(killed); d > ttl+time.Second {
			t.Fatalf("outcome unknown %s after the kill, want within the lease TTL %s", d, ttl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome after the executor was killed")
	}
	// The session continues on another executor.
	f.client(executor.Options{Executor: executor.ExecutorInfo{Name: "other"}})
	l2 := f.assign("s1", "bash")
	res, err := l2.CallTool(context.Background(), tool.Call{ID: "c2", Name: "bash", Input: input(map[string]any{"command": "echo continued"})})
	if err != nil || res.Content[0].Text != "continued" {
		t.Fatalf("on the new executor: %v %+v", err, res)
	}
}
