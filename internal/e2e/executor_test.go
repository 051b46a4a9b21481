package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/executorhub"
)

// toolScript asks the scripted model for one call of each built-in tool.
const toolScript = `@tool write {"file_path":"notes/hello.txt","content":"hello reins\nsecond line\n"}
@tool edit {"file_path":"notes/hello.txt","old_string":"second","new_string":"2nd"}
@tool read {"file_path":"notes/hello.txt"}
@tool glob {"pattern":"**/*.txt"}
@tool grep {"pattern":"2nd"}
@tool bash {"command":"cat notes/hello.txt | wc -l"}
@then all six tools ran`

// checkToolResults asserts the six results of toolScript.
func checkToolResults(t *testing.T, got []frame) {
	t.Helper()
	var results []frame
	for _, f := range got {
		if f.Type == "agent.tool_result" {
			results = append(results, f)
		}
	}
	if len(results) != 6 {
		t.Fatalf("%d tool results, want 6: %v", len(results), types(got))
	}
	text := func(f frame) string {
		var b strings.Builder
		for _, c := range f.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	for i, r := range results {
		if r.IsError != nil && *r.IsError {
			t.Fatalf("tool result %d is an error: %s", i, text(r))
		}
	}
	if s := text(results[2]); !strings.Contains(s, "hello reins") || !strings.Contains(s, "2nd line") {
		t.Fatalf("read after edit: %q", s)
	}
	if s := text(results[3]); !strings.Contains(s, "notes/hello.txt") {
		t.Fatalf("glob: %q", s)
	}
	if s := text(results[4]); !strings.Contains(s, "hello.txt") {
		t.Fatalf("grep: %q", s)
	}
	if s := text(results[5]); !strings.Contains(s, "2") {
		t.Fatalf("bash: %q", s)
	}
	if got[len(got)-1].StopReason.Type != "end_turn" {
		t.Fatalf("turn ended with %+v", got[len(got)-1].StopReason)
	}
}

func TestCloudEnvironmentRunsBuiltinTools(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, s.newEnv(t, "cloud").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(toolScript))
	got := st.until(isIdle)
	checkToolResults(t, got)
	for _, f := range got {
		if f.Type == "agent.tool_use" && f.EvaluatedPermission != "allow" {
			t.Fatalf("tool use %s evaluated %q", f.Name, f.EvaluatedPermission)
		}
	}
}

func TestSelfHostedEnvironmentWithExecutorChild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs reins executor")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, options{})
	ctx := context.Background()
	env, err := s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "hands",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	if err != nil {
		t.Fatal(err)
	}
	var key struct {
		Type, ID, Key string
	}
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env.ID+"/keys", nil, &key); err != nil {
		t.Fatal(err)
	}
	if key.Type != "environment_key" || !strings.HasPrefix(key.Key, "reins_ek_") {
		t.Fatalf("key %+v", key)
	}
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, sess.ID)

	// No executor yet: the session waits in rescheduling.
	s.send(t, sess.ID, userMessage(toolScript))
	st.until(func(f frame) bool { return f.Type == "session.status_rescheduled" })
	got, _ := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if got.Status != "rescheduling" {
		t.Fatalf("status %s, want rescheduling", got.Status)
	}

	ws := t.TempDir()
	cmd := exec.Command(bin, "executor", "--url", s.url, "--environment-key", key.Key, "--workspace", ws, "--name", "test-hands")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("reins executor output:\n%s", out.String())
		}
	}()
	rest := st.until(isIdle)
	if rest[0].Type != "session.status_running" {
		t.Fatalf("after the executor registered: %v", types(rest))
	}
	checkToolResults(t, rest)
	// The files are in the executor's workspace, not the server's.
	matches, _ := filepath.Glob(filepath.Join(ws, "*", "notes", "hello.txt"))
	if len(matches) != 1 {
		entries, _ := os.ReadDir(ws)
		t.Fatalf("file not in the executor workspace (%v)", entries)
	}
	// A revoked key is refused by the token endpoint.
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env.ID+"/keys/"+key.ID+"/revoke", nil, nil); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	json.NewEncoder(&body).Encode(map[string]string{})
	req, _ := httpNewRequest("POST", s.url+"/v1/executor/tokens", key.Key)
	resp, err := httpDo(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp != 401 {
		t.Fatalf("token endpoint with a revoked key: %d, want 401", resp)
	}
}

// startExecutor runs a reins executor child process.
func startExecutor(t *testing.T, bin, url, key, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "executor", "--url", url, "--environment-key", key, "--workspace", t.TempDir(), "--name", name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return cmd
}

func TestExecutorKilledMidToolThenAnotherTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs reins executor")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	s := startWith(t, options{}, func(c *app.Config) {
		c.Hub = executorhub.HubOptions{LeaseTTL: 2 * time.Second, HeartbeatInterval: 300 * time.Millisecond}
	})
	ctx := context.Background()
	env, err := s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "hands",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env.ID+"/keys", nil, &key); err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, sess.ID)

	first := startExecutor(t, bin, s.url, key.Key, "first")
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"echo started; sleep 60"}`))
	st.until(func(f frame) bool { return f.Type == "agent.tool_use" })
	time.Sleep(500 * time.Millisecond) // the tool is running on the first executor
	startExecutor(t, bin, s.url, key.Key, "second")
	killed := time.Now()
	first.Process.Signal(syscall.SIGKILL)
	got := st.until(isIdle)
	var result frame
	for _, f := range got {
		if f.Type == "agent.tool_result" {
			result = f
		}
	}
	if result.IsError == nil || !*result.IsError || !strings.Contains(result.Content[0].Text, "may or may not have run") {
		t.Fatalf("result after the kill: %+v (%v)", result, types(got))
	}
	if d := time.Since(killed); d > 2*time.Second+3*time.Second {
		t.Fatalf("outcome-unknown result after %s; lease TTL is 2s", d)
	}
	// The session continues on the second executor.
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"echo on the second"}`))
	got = st.until(isIdle)
	for _, f := range got {
		if f.Type == "agent.tool_result" {
			if (f.IsError != nil && *f.IsError) || !strings.Contains(f.Content[0].Text, "on the second") {
				t.Fatalf("second executor result: %+v", f)
			}
			return
		}
	}
	t.Fatalf("no tool result on the second executor: %v", types(got))
}
