package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

func TestMain(m *testing.M) {
	if os.Getenv(asReinsEnv) == "1" {
		// This test binary, run as `reins` by the tests that need a
		// process of its own (signals, a terminal, a crash).
		Main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testServer is a real reins server on a loopback port.
type testServer struct {
	url, key, dataDir string
	agentID, envID    string
	// store is the server's, for writes no API makes (a runner's).
	store store.Store
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	// The tests' MCP servers listen on loopback, which the server refuses
	// unless the operator allows it.
	a, err := app.New(ctx, app.Config{DataDir: dir,
		Retry:         harness.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond},
		OutboundAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	key, _, err := httpapi.CreateKey(ctx, a.Store, "test")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := a.SeedDemo(ctx, "scripted")
	if err != nil {
		t.Fatal(err)
	}
	// Keep the person's environment out of the tests.
	for _, name := range []string{"REINS_URL", "REINS_ADDR", "ANTHROPIC_BASE_URL", "REINS_API_KEY", "ANTHROPIC_API_KEY", "REINS_DATA_DIR", "NO_COLOR"} {
		t.Setenv(name, "")
	}
	return &testServer{url: "http://" + ln.Addr().String(), key: key, dataDir: dir, agentID: demo.AgentID, envID: demo.EnvironmentID, store: a.Store}
}

// result is the outcome of one CLI invocation.
type result struct {
	stdout, stderr string
	err            error
}

func (r result) code() int {
	if r.err == nil {
		return 0
	}
	return exitCode(r.err)
}

// run executes the CLI against the server with its URL and key.
func (s *testServer) run(t *testing.T, args ...string) result {
	t.Helper()
	return s.runCtx(t, context.Background(), args...)
}

func (s *testServer) runCtx(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	return execute(ctx, "", append(args, "--url", s.url, "--api-key", s.key)...)
}

func execute(ctx context.Context, stdin string, args ...string) result {
	root := newRootCommand()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(stdin))
	err := root.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}

func (r result) must(t *testing.T) result {
	t.Helper()
	if r.err != nil {
		t.Fatalf("command failed: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	return r
}

// jsonField decodes JSON output and returns a top-level field.
func jsonField(t *testing.T, out, field string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, out)
	}
	return m[field]
}

func assertContains(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
}

func TestAgentsCRUD(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "agents", "create", "--name", "helper", "--model", "scripted", "--system", "Be brief.",
		"--toolset", "always_ask", "--custom-tool", "get_weather=Weather by city", "--metadata", "team=cli").must(t)
	assertContains(t, r.stdout, "name:", "helper", "version:  1", "model:    scripted",
		"agent_toolset_20260401(always_ask), custom:get_weather", "team=cli")
	id := regexp.MustCompile(`agent_\w+`).FindString(r.stdout)
	if id == "" {
		t.Fatalf("no agent id in:\n%s", r.stdout)
	}

	r = s.run(t, "agents", "get", id, "-o", "json").must(t)
	if got := jsonField(t, r.stdout, "name"); got != "helper" {
		t.Errorf("json name = %v", got)
	}

	r = s.run(t, "agents", "list").must(t)
	assertContains(t, r.stdout, "ID", "NAME", "helper", "demo", id)

	r = s.run(t, "agents", "update", id, "--system", "Answer in French.", "--version", "1").must(t)
	assertContains(t, r.stdout, "version:  2")

	// A stale version check is refused with the server's explanation.
	r = s.run(t, "agents", "update", id, "--system", "Again.", "--version", "1")
	if r.err == nil || !strings.Contains(r.err.Error(), "HTTP 409") {
		t.Errorf("stale update: err = %v, want a 409", r.err)
	}

	r = s.run(t, "agents", "versions", id).must(t)
	if n := strings.Count(r.stdout, id); n != 2 {
		t.Errorf("versions list has %d rows of %s, want 2:\n%s", n, id, r.stdout)
	}
	r = s.run(t, "agents", "get", id, "--version", "1", "-o", "json").must(t)
	if got := jsonField(t, r.stdout, "system"); got != "Be brief." {
		t.Errorf("version 1 system = %v", got)
	}

	// --file gives the whole body; flags override its fields.
	file := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(file, []byte(`{"name":"from-file","model":"scripted","description":"file description"}`), 0o600)
	r = s.run(t, "agents", "create", "--file", file, "--name", "overridden").must(t)
	assertContains(t, r.stdout, "overridden", "file description")

	r = s.run(t, "agents", "archive", id).must(t)
	assertContains(t, r.stdout, "archived:")
	r = s.run(t, "agents", "list").must(t)
	if strings.Contains(r.stdout, id) {
		t.Errorf("archived agent still listed:\n%s", r.stdout)
	}
	r = s.run(t, "agents", "list", "--include-archived", "-o", "json").must(t)
	if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, `"next_page"`) {
		t.Errorf("json list lacks the archived agent or next_page:\n%s", r.stdout)
	}

	r = s.run(t, "agents", "get", "agent_nope")
	if r.err == nil || !strings.Contains(r.err.Error(), "HTTP 404 not_found_error") {
		t.Errorf("missing agent: err = %v", r.err)
	}
}

func TestAgentsListPaging(t *testing.T) {
	s := startServer(t)
	for _, name := range []string{"a1", "a2"} {
		s.run(t, "agents", "create", "--name", name, "--model", "scripted").must(t)
	}
	r := s.run(t, "agents", "list", "--limit", "1").must(t)
	m := regexp.MustCompile(`--page (\S+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no next-page hint on stderr: %q", r.stderr)
	}
	r2 := s.run(t, "agents", "list", "--limit", "1", "--page", m[1]).must(t)
	if r2.stdout == r.stdout {
		t.Errorf("second page equals the first:\n%s", r.stdout)
	}
}

func TestEnvironmentsCRUD(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "environments", "create", "--name", "locked", "--networking", "limited", "--allowed-host", "pypi.org", "--metadata", "k=v").must(t)
	assertContains(t, r.stdout, "locked", "cloud", "limited (pypi.org)", "k=v")
	id := regexp.MustCompile(`env_\w+`).FindString(r.stdout)

	r = s.run(t, "environments", "create", "--name", "laptop", "--type", "self_hosted", "-o", "json").must(t)
	cfg, _ := jsonField(t, r.stdout, "config").(map[string]any)
	if cfg["type"] != "self_hosted" {
		t.Errorf("self-hosted config = %v", cfg)
	}

	s.run(t, "environments", "get", id).must(t)
	r = s.run(t, "environments", "list").must(t)
	assertContains(t, r.stdout, "locked", "laptop", "demo", "self_hosted")

	r = s.run(t, "environments", "update", id, "--name", "renamed", "--description", "new words").must(t)
	assertContains(t, r.stdout, "renamed", "new words")

	r = s.run(t, "environments", "archive", id).must(t)
	assertContains(t, r.stdout, "archived:")
	r = s.run(t, "environments", "delete", id).must(t)
	assertContains(t, r.stdout, "deleted "+id)
	if r := s.run(t, "environments", "get", id); r.err == nil {
		t.Errorf("deleted environment still found")
	}
}

func TestSessionsCRUD(t *testing.T) {
	s := startServer(t)
	// The environment defaults to the first cloud environment.
	r := s.run(t, "sessions", "create", "--agent", s.agentID, "--title", "first", "--metadata", "ticket=42").must(t)
	assertContains(t, r.stdout, "status:", "idle", "first", s.envID, "ticket=42", s.agentID+" v1")
	id := regexp.MustCompile(`sesn_\w+`).FindString(r.stdout)

	r = s.run(t, "sessions", "send", id, "@text", "pong").must(t)
	assertContains(t, r.stdout, "sent user.message sevt_")
	waitIdle(t, s, id)

	r = s.run(t, "sessions", "events", id).must(t)
	assertContains(t, r.stdout, "user.message", "agent.message", "pong", "session.status_idle", "end_turn")
	r = s.run(t, "sessions", "events", id, "--type", "agent.message", "-o", "json").must(t)
	data, _ := jsonField(t, r.stdout, "data").([]any)
	if len(data) != 1 {
		t.Errorf("filtered events: %d, want 1:\n%s", len(data), r.stdout)
	}

	r = s.run(t, "sessions", "list", "--agent", s.agentID, "--status", "idle").must(t)
	assertContains(t, r.stdout, id, "first")

	r = s.run(t, "sessions", "archive", id).must(t)
	assertContains(t, r.stdout, "archived:")
	r = s.run(t, "sessions", "delete", id).must(t)
	assertContains(t, r.stdout, "deleted "+id)

	r = s.run(t, "sessions", "create", "--agent", s.agentID, "--environment", "env_missing")
	if r.err == nil {
		t.Errorf("a session in a missing environment was created")
	}
	if r := s.run(t, "sessions", "send", "sesn_x"); r.err == nil || !strings.Contains(r.err.Error(), "nothing to send") {
		t.Errorf("empty send: %v", r.err)
	}
}

// waitIdle polls until the session is idle.
func waitIdle(t *testing.T, s *testServer, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r := s.run(t, "sessions", "get", id, "-o", "json").must(t)
		if jsonField(t, r.stdout, "status") == ma.StatusIdle {
			// The status is idle before the turn's events are all listed?
			// Check the log ends with an idle event too.
			ev := s.run(t, "sessions", "events", id, "--order", "desc", "--limit", "1", "-o", "json").must(t)
			if strings.Contains(ev.stdout, ma.EventStatusIdle) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s did not go idle", id)
}

func TestSessionsRunText(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "run", "--agent", s.agentID, "@text Hello from the scripted model").must(t)
	if r.stdout != "Hello from the scripted model\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	assertContains(t, r.stderr, "session sesn_")

	// A plain prompt is echoed; the prompt can come from stdin.
	r = execute(context.Background(), "just words\n", "sessions", "run", "--agent", s.agentID, "--environment", s.envID, "--url", s.url, "--api-key", s.key).must(t)
	assertContains(t, r.stdout, "You said: just words")
}

func TestSessionsRunJSON(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "run", "--agent", s.agentID, "-o", "json", "@text hi").must(t)
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct{ Type string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		types = append(types, ev.Type)
	}
	got := strings.Join(types, " ")
	for _, want := range []string{"session.status_running", "agent.message", "session.status_idle"} {
		if !strings.Contains(got, want) {
			t.Errorf("events %q lack %s", got, want)
		}
	}
	// Previews are best effort (the server may shed them when the final
	// message is committed first), but never follow the message.
	if i := strings.Index(got, "event_delta"); i > strings.Index(got, "agent.message") {
		t.Errorf("a preview after its message: %q", got)
	}
}

func TestSessionsRunRetriesThenAnswers(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "run", "--agent", s.agentID, "@fail overloaded 2\n@text recovered").must(t)
	want := regexp.MustCompile(`(?s)^model overloaded — retrying in \S+ \(attempt 2 of 3\)…\nmodel overloaded — retrying in \S+ \(attempt 3 of 3\)…\nrecovered\n$`)
	if !want.MatchString(r.stdout) {
		t.Errorf("stdout:\n%s", r.stdout)
	}
}

func TestSessionsRunExhausted(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "run", "--agent", s.agentID, "@fail overloaded")
	if r.code() != 1 {
		t.Fatalf("exit %d (%v), want 1", r.code(), r.err)
	}
	assertContains(t, r.stdout, "(attempt 3 of 3)",
		"turn abandoned after 3 attempts: the model is overloaded; send a new message to try again")
}

func TestSessionsRunBilling(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "run", "--agent", s.agentID, "@fail billing")
	if r.code() != 1 {
		t.Fatalf("exit %d (%v), want 1", r.code(), r.err)
	}
	assertContains(t, r.stdout,
		"turn abandoned after 1 attempt: the model provider refused the request for billing reasons; send a new message to try again",
		"HTTP 402")
	if strings.Contains(r.stdout, "retrying") {
		t.Errorf("a billing error was retried:\n%s", r.stdout)
	}
}

func TestSessionsRunAlwaysAsk(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "agents", "create", "--name", "asker", "--model", "scripted", "--toolset", "always_ask").must(t)
	agent := regexp.MustCompile(`agent_\w+`).FindString(r.stdout)
	prompt := "@tool grep {\"pattern\":\"x\"}\n@then checked"

	r = s.run(t, "sessions", "run", "--agent", agent, "--auto-approve", prompt).must(t)
	assertContains(t, r.stdout, `→ grep {"pattern":"x"}  (needs approval)`, "✓ approved grep", "← grep", "checked")

	r = s.run(t, "sessions", "run", "--agent", agent, "--auto-deny", prompt).must(t)
	assertContains(t, r.stdout, "✗ denied grep", "checked")
	if strings.Contains(r.stdout, "✓ approved") {
		t.Errorf("denied call approved:\n%s", r.stdout)
	}

	// No terminal and no flag: the run stops and says how to answer. (The
	// sleep applies to each model call: it leaves tail time to connect.)
	r = s.run(t, "sessions", "run", "--agent", agent, "@sleep 1s\n"+prompt)
	if r.code() != exitNeedsInput {
		t.Fatalf("exit %d (%v), want %d", r.code(), r.err, exitNeedsInput)
	}
	assertContains(t, r.err.Error(), "approval of grep", "reins sessions send sesn_", "--auto-approve")
	sess := regexp.MustCompile(`sesn_\w+`).FindString(r.err.Error())
	toolUse := regexp.MustCompile(`sevt_\w+`).FindString(r.err.Error())
	// Answer it by hand and follow the rest with tail.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tail := make(chan result, 1)
	go func() { tail <- s.runCtx(t, ctx, "sessions", "tail", sess, "--until-idle", "--history") }()
	s.run(t, "sessions", "send", sess, "--approve", toolUse).must(t)
	tr := <-tail
	tr.must(t)
	assertContains(t, tr.stdout, "› @sleep 1s\n@tool grep", "✓ approved grep", "checked")
}

func TestSessionsRunCustomTool(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "agents", "create", "--name", "weather", "--model", "scripted", "--custom-tool", "get_weather=Weather by city").must(t)
	agent := regexp.MustCompile(`agent_\w+`).FindString(r.stdout)
	r = s.run(t, "sessions", "run", "--agent", agent, "--tool-response", "get_weather=sunny, 21°C",
		"@tool get_weather {\"city\":\"Paris\"}").must(t)
	assertContains(t, r.stdout, `→ custom tool get_weather {"city":"Paris"}`, "← get_weather: sunny, 21°C", "The tool returned: sunny, 21°C")
}

func TestSessionsRunInterrupt(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Ctrl-C once the turn is under way.
		for ctx.Err() == nil {
			r := s.run(t, "sessions", "list", "--status", "running")
			if strings.Contains(r.stdout, "sesn_") {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	r := s.runCtx(t, ctx, "sessions", "run", "--agent", s.agentID, "@sleep 30s\n@text too late")
	if r.code() != exitInterrupted {
		t.Fatalf("exit %d (%v), want %d", r.code(), r.err, exitInterrupted)
	}
	assertContains(t, r.stdout, "interrupted")
	sess := regexp.MustCompile(`sesn_\w+`).FindString(r.stderr)
	waitIdle(t, s, sess)
	ev := s.run(t, "sessions", "events", sess).must(t)
	assertContains(t, ev.stdout, "user.interrupt", "end_turn")
	if strings.Contains(ev.stdout, "agent.message") {
		t.Errorf("the interrupted turn still answered:\n%s", ev.stdout)
	}
}

func TestUnauthorized(t *testing.T) {
	s := startServer(t)
	const bad = "sk-reins-not-a-real-key-123456"
	r := execute(context.Background(), "", "agents", "list", "--url", s.url, "--api-key", bad)
	if r.err == nil {
		t.Fatal("a bad key was accepted")
	}
	msg := r.err.Error()
	assertContains(t, msg, "rejected the API key from the --api-key flag", "HTTP 401", s.url, "reins keys create")
	if strings.Contains(msg+r.stdout+r.stderr, bad) {
		t.Errorf("the key was printed: %s", msg)
	}

	// From the environment, the variable is named.
	t.Setenv("REINS_API_KEY", bad)
	r = execute(context.Background(), "", "sessions", "list", "--url", s.url)
	if r.err == nil || !strings.Contains(r.err.Error(), "$REINS_API_KEY") {
		t.Errorf("err = %v, want it to name $REINS_API_KEY", r.err)
	}
}

// TestAnthropicVariablesAreNotReinsCredentials: with the README's Claude
// setup exported (ANTHROPIC_API_KEY, and ANTHROPIC_BASE_URL for the
// server's upstream), the CLI still finds the server from REINS_ADDR and
// the key in the data dir, never sending the Anthropic key.
func TestAnthropicVariablesAreNotReinsCredentials(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, app.KeyFile), []byte(s.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-reins-key")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("REINS_ADDR", strings.TrimPrefix(s.url, "http://"))
	t.Setenv("REINS_DATA_DIR", dir)
	r := execute(context.Background(), "", "agents", "list").must(t)
	assertContains(t, r.stdout, "demo")
}

func TestBadURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:4290", "http://127.0.0.1:4290/v1"} {
		r := execute(context.Background(), "", "agents", "list", "--url", u, "--api-key", "k")
		if r.err == nil || !strings.Contains(r.err.Error(), "--url") || strings.Contains(r.err.Error(), "requestoption") {
			t.Errorf("--url %s: %v", u, r.err)
		}
	}
}

func TestKeyFromDataDir(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, app.KeyFile), []byte(s.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REINS_URL", s.url)
	r := execute(context.Background(), "", "agents", "list", "--data-dir", dir).must(t)
	assertContains(t, r.stdout, "demo")

	r = execute(context.Background(), "", "agents", "list", "--data-dir", t.TempDir())
	if r.err == nil || !strings.Contains(r.err.Error(), "no API key") {
		t.Errorf("err = %v, want no API key", r.err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	r := execute(context.Background(), "", "environments", "list", "--url", url, "--api-key", "k")
	if r.err == nil {
		t.Fatal("no error from a closed port")
	}
	assertContains(t, r.err.Error(), "cannot reach the reins server at "+url, "reins serve")
	var ex *explained
	if !errors.As(r.err, &ex) {
		t.Errorf("error %T is not explained", r.err)
	}
}

func TestBadOutputFlag(t *testing.T) {
	r := execute(context.Background(), "", "agents", "list", "--output", "yaml", "--api-key", "k")
	if r.err == nil || !strings.Contains(r.err.Error(), "--output") {
		t.Errorf("err = %v", r.err)
	}
}

func TestSessionsRunContinuesASession(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "create", "--agent", s.agentID, "-o", "json").must(t)
	id, _ := jsonField(t, r.stdout, "id").(string)
	// A turn is running when run joins: its idle must not end the run.
	s.run(t, "sessions", "send", id, "@sleep 500ms\n@text first").must(t)
	r = s.run(t, "sessions", "run", "--session", id, "@text second").must(t)
	assertContains(t, r.stdout, "second")
	assertContains(t, r.stderr, "session "+id)

	if r := s.run(t, "sessions", "run", "--session", id, "--agent", s.agentID, "x"); r.err == nil {
		t.Error("--session with --agent accepted")
	}
}

// TestUnknownSubcommandFails: a misspelt subcommand of a group is an error
// (exit 1, naming it), not the group's help and exit 0.
func TestUnknownSubcommandFails(t *testing.T) {
	for _, args := range [][]string{{"sessions", "lst"}, {"vaults", "credentials", "lst"}, {"environments", "keys", "nope"}} {
		r := execute(context.Background(), "", args...)
		if r.code() != 1 || r.err == nil || !strings.Contains(r.err.Error(), `unknown command "`+args[len(args)-1]+`"`) {
			t.Errorf("reins %v: exit %d, error %v; want exit 1 naming the command", args, r.code(), r.err)
		}
	}
	if r := execute(context.Background(), "", "sessions"); r.code() != 0 || !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("reins sessions: exit %d, stdout %q; want its help", r.code(), r.stdout)
	}
}
