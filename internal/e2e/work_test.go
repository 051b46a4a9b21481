package e2e

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
)

var buildWorker = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reins-sdkworker")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "sdkworker")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/reinsdev/reins/internal/e2e/sdkworker").CombinedOutput()
	if err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

// selfHosted creates a self-hosted environment and an environment key.
func (s *server) selfHosted(t *testing.T, name string) (envID, key string) {
	t.Helper()
	env, err := s.client.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: name,
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env.ID+"/keys", nil, &k); err != nil {
		t.Fatal(err)
	}
	return env.ID, k.Key
}

// waitWorkState waits until the environment's latest work item is in state.
func (s *server) waitWorkState(t *testing.T, envID, state string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var page struct {
			Data []struct{ ID, State string }
		}
		if _, err := call(s.url, s.key, "GET", "/v1/environments/"+envID+"/work?limit=100", nil, &page); err != nil {
			t.Fatal(err)
		}
		if n := len(page.Data); n > 0 && page.Data[n-1].State == state {
			return page.Data[n-1].ID
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no work item reached %s", state)
	return ""
}

const workerScript = `@tool write {"file_path":"hello.txt","content":"hello reins\nsecond line\n"}
@tool edit {"file_path":"hello.txt","old_string":"second","new_string":"2nd"}
@tool read {"file_path":"hello.txt"}
@tool glob {"pattern":"*.txt"}
@tool grep {"pattern":"2nd"}
@tool bash {"command":"wc -l < hello.txt"}
@then the worker ran all six`

func TestOfficialEnvironmentWorker(t *testing.T) {
	s := start(t, options{})
	envID, key := s.selfHosted(t, "pull")
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)

	// The unmodified SDK worker, in process.
	workdir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	idle := 2 * time.Second
	worker := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(s.url), option.WithMaxRetries(0)),
		environments.EnvironmentWorkerOptions{EnvironmentID: envID, EnvironmentKey: key, Workdir: workdir, MaxIdle: &idle,
			Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	s.waitWorkState(t, envID, "active")

	s.send(t, sess.ID, userMessage(workerScript))
	got := st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" })
	var results []frame
	for _, f := range got {
		switch f.Type {
		case "user.tool_result":
			if f.ProcessedAt != nil {
				results = append(results, f)
			}
		case "agent.tool_result":
			t.Fatalf("the server ran a tool of a pull-worker session: %+v", f)
		}
	}
	if len(results) != 6 {
		t.Fatalf("%d user.tool_result, want 6: %v", len(results), types(got))
	}
	for _, r := range results {
		if r.IsError != nil && *r.IsError {
			t.Fatalf("tool failed: %+v", r.Content)
		}
	}
	if !strings.Contains(results[2].Content[0].Text, "2nd line") || !strings.Contains(results[5].Content[0].Text, "2") {
		t.Fatalf("read %q bash %q", results[2].Content[0].Text, results[5].Content[0].Text)
	}
	data, err := os.ReadFile(filepath.Join(workdir, "hello.txt"))
	if err != nil || !strings.Contains(string(data), "2nd line") {
		t.Fatalf("file in the worker's workdir: %q %v", data, err)
	}
	if !strings.Contains(got[len(got)-4].Content[0].Text, "the worker ran all six") {
		t.Fatalf("final answer %v", types(got))
	}
}

func TestWorkerKilledMidSessionAnotherTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills worker processes")
	}
	bin, err := buildWorker()
	if err != nil {
		t.Fatal(err)
	}
	s := startWith(t, options{}, func(c *app.Config) { c.WorkLeaseTTL = 2 * time.Second })
	envID, key := s.selfHosted(t, "pull")
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	workdir := t.TempDir()
	startWorker := func(name string) *exec.Cmd {
		cmd := exec.Command(bin, s.url, envID, key, workdir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("%s:\n%s", name, out.String())
			}
		})
		return cmd
	}
	first := startWorker("first worker")
	s.waitWorkState(t, envID, "active")
	// The first run of the command hangs; a second run (after the takeover)
	// finds the marker and answers at once.
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"if [ -f marker ]; then echo second run; else touch marker; sleep 60; fi"}`+"\n@then done"))
	st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "requires_action" })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(workdir, "marker")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first worker never ran the tool")
		}
		time.Sleep(50 * time.Millisecond)
	}
	first.Process.Signal(syscall.SIGKILL)
	st.until(func(f frame) bool { return f.Type == "session.status_rescheduled" })
	startWorker("second worker")
	got := st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" })
	var result frame
	for _, f := range got {
		if f.Type == "user.tool_result" && f.ProcessedAt != nil {
			result = f
		}
	}
	if result.ID == "" || !strings.Contains(result.Content[0].Text, "second run") {
		t.Fatalf("second worker's result %+v (%v)", result, types(got))
	}
}

func TestWorkQueueErrors(t *testing.T) {
	s := start(t, options{})
	envID, key := s.selfHosted(t, "pull")
	otherEnv, _ := s.selfHosted(t, "other")
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, envID)
	other := s.newSession(t, a.ID, otherEnv)
	bearer := func(method, path string, body any, out any) (int, error) {
		return callBearer(s.url, key, method, path, body, out)
	}
	base := "/v1/environments/" + envID + "/work"

	if st, _ := bearer("GET", base+"/poll?block_ms=0", nil, nil); st != 400 {
		t.Fatalf("block_ms=0: %d", st)
	}
	var item struct {
		ID, State string
		Data      struct{ ID string }
	}
	if _, err := bearer("GET", base+"/poll?block_ms=500", nil, &item); err != nil || item.Data.ID != sess.ID || item.State != "queued" {
		t.Fatalf("poll: %+v %v", item, err)
	}
	if _, err := bearer("POST", base+"/"+item.ID+"/ack", nil, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := bearer("POST", base+"/"+item.ID+"/ack", nil, nil); st != 409 {
		t.Fatalf("double ack: %d", st)
	}
	var hb struct {
		LastHeartbeat string `json:"last_heartbeat"`
		LeaseExtended bool   `json:"lease_extended"`
		State         string
	}
	if _, err := bearer("POST", base+"/"+item.ID+"/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, &hb); err != nil || !hb.LeaseExtended || hb.State != "active" {
		t.Fatalf("first heartbeat: %+v %v", hb, err)
	}
	if st, _ := bearer("POST", base+"/"+item.ID+"/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", nil, nil); st != 412 {
		t.Fatalf("stale heartbeat: %d, want 412", st)
	}
	if _, err := bearer("POST", base+"/"+item.ID+"/heartbeat?expected_last_heartbeat="+hb.LastHeartbeat, nil, &hb); err != nil {
		t.Fatalf("second heartbeat: %v", err)
	}
	var stats struct {
		Type           string
		Depth          int64
		WorkersPolling int64 `json:"workers_polling"`
	}
	if _, err := call(s.url, s.key, "GET", base+"/stats", nil, &stats); err != nil || stats.Type != "work_queue_stats" || stats.WorkersPolling != 1 {
		t.Fatalf("stats: %+v %v", stats, err)
	}
	if _, err := bearer("POST", base+"/"+item.ID+"/stop", map[string]any{"force": true}, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := bearer("POST", base+"/"+item.ID+"/stop", map[string]any{"force": true}, nil); st != 409 {
		t.Fatalf("stop of a stopped item: %d", st)
	}
	// Scope: the key reaches its own sessions, not another environment's.
	if _, err := bearer("GET", "/v1/sessions/"+sess.ID, nil, nil); err != nil {
		t.Fatalf("own session: %v", err)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sessions/" + other.ID},
		{"GET", "/v1/sessions/" + other.ID + "/events"},
		{"GET", "/v1/environments/" + otherEnv + "/work/poll"},
		{"GET", "/v1/agents"},
		{"POST", "/v1/sessions/" + sess.ID + "/archive"},
	} {
		if st, _ := bearer(c.method, c.path, nil, nil); st != 403 && st != 404 {
			t.Fatalf("%s %s with an environment key: %d, want 403/404", c.method, c.path, st)
		}
	}
}

// callBearer is call with the credential as a bearer token.
func callBearer(url, bearer, method, path string, body, out any) (int, error) {
	return callWith(url, method, path, body, out, func(h map[string]string) { h["Authorization"] = "Bearer " + bearer })
}

// TestForcedStopEndsTheWorkersHold: a session waiting for a pull worker's
// tool results whose item is force-stopped goes rescheduling, and a new
// item is queued for the next worker.
func TestForcedStopEndsTheWorkersHold(t *testing.T) {
	s := start(t, options{})
	envID, key := s.selfHosted(t, "pull")
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	base := "/v1/environments/" + envID + "/work"
	var item struct{ ID string }
	if _, err := callBearer(s.url, key, "GET", base+"/poll", nil, &item); err != nil || item.ID == "" {
		t.Fatalf("poll: %+v %v", item, err)
	}
	if _, err := callBearer(s.url, key, "POST", base+"/"+item.ID+"/ack", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Metadata update and get.
	var got struct {
		State    string
		Metadata map[string]string
	}
	if _, err := call(s.url, s.key, "POST", base+"/"+item.ID, map[string]any{"metadata": map[string]any{"host": "laptop"}}, &got); err != nil || got.Metadata["host"] != "laptop" {
		t.Fatalf("metadata update: %+v %v", got, err)
	}
	if _, err := call(s.url, s.key, "GET", base+"/"+item.ID, nil, &got); err != nil || got.State != "starting" {
		t.Fatalf("get: %+v %v", got, err)
	}
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"true"}`))
	st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "requires_action" })
	if _, err := call(s.url, s.key, "POST", base+"/"+item.ID+"/stop", map[string]any{"force": true}, &got); err != nil || got.State != "stopped" {
		t.Fatalf("force stop: %+v %v", got, err)
	}
	st.until(func(f frame) bool { return f.Type == "session.status_rescheduled" })
	var stats struct{ Depth int64 }
	if _, err := call(s.url, s.key, "GET", base+"/stats", nil, &stats); err != nil || stats.Depth != 1 {
		t.Fatalf("a new item should be queued for the session: %+v %v", stats, err)
	}
}
