package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/executorhub"
)

// The executor SDKs under sdk/ are driven by a real `reins serve` through
// their e2e executors (sdk/typescript/e2e/executor.mjs,
// sdk/python/e2e/executor.py): each serves bash (the SDK's, sandboxed), a custom read, and a write
// that refuses with RpcError.withReason / RPCError.with_reason, and prints
// its events as JSON lines. They are never skipped: without node or
// /usr/bin/python3 with websockets they fail (.ci/run installs both).

func TestTypeScriptExecutorSDK(t *testing.T) {
	node, dir := typeScriptSDK(t)
	sdkExecutorScenario(t, func(url, key, name, ws string) *exec.Cmd {
		return exec.Command(node, filepath.Join(dir, "e2e", "executor.mjs"), url, key, name, ws)
	})
}

func TestPythonExecutorSDK(t *testing.T) {
	py, dir := pythonSDK(t)
	sdkExecutorScenario(t, func(url, key, name, ws string) *exec.Cmd {
		return pythonCommand(py, dir, filepath.Join(dir, "e2e", "executor.py"), url, key, name, ws)
	})
}

// typeScriptSDK returns node and sdk/typescript, installed and built.
func typeScriptSDK(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("Node.js is required for this test (.ci/run installs it when missing)")
	}
	dir, _ = filepath.Abs("../../sdk/typescript")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ws", "package.json")); err != nil {
		runIn(t, dir, "npm", "ci", "--no-audit", "--no-fund") // also builds (prepare)
	} else {
		runIn(t, dir, "npm", "run", "--silent", "build")
	}
	return node, dir
}

// pythonSDK returns Debian's python3 (with python3-websockets, which
// .ci/run installs) and sdk/python.
func pythonSDK(t *testing.T) (py, dir string) {
	t.Helper()
	py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import websockets").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import websockets (apt-get install python3-websockets): %v\n%s", py, err, out)
	}
	dir, _ = filepath.Abs("../../sdk/python")
	return py, dir
}

// pythonCommand runs a script of the Python SDK with the SDK on its path.
func pythonCommand(py, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(dir, "src"))
	return cmd
}

func runIn(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// sdkExecutorScenario drives sessions whose tools run on an SDK executor
// started by command: results reach the model, a handler's RPC error keeps
// its code and reason, an interrupt reaches the handler as tool.cancel, a
// socket cut mid-tool delivers the result once after the reconnect, a
// second executor with the same name stops the first with the replaced
// error (4004), and a revoked key ends the client with the
// credential-rejected error.
func sdkExecutorScenario(t *testing.T, command func(url, key, name, workspace string) *exec.Cmd) {
	s := startWith(t, options{}, func(c *app.Config) {
		c.Hub = executorhub.HubOptions{LeaseTTL: 10 * time.Second, HeartbeatInterval: 300 * time.Millisecond}
	})
	px := newCutProxy(t, strings.TrimPrefix(s.url, "http://"))
	envID, _ := s.selfHosted(t, "sdk hands")
	var key struct{ ID, Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+envID+"/keys", nil, &key); err != nil {
		t.Fatal(err)
	}
	var agent struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{
		"name": "sdk hands", "model": map[string]any{"id": "scripted"},
		"tools": []any{map[string]any{"type": "agent_toolset_20260401", "default_config": map[string]any{"enabled": false},
			"configs": []any{
				map[string]any{"name": "bash", "enabled": true},
				map[string]any{"name": "read", "enabled": true},
				map[string]any{"name": "write", "enabled": true},
			}}},
	}, &agent); err != nil {
		t.Fatal(err)
	}

	t.Setenv("REINS_SDK_E2E_SECRET", "sdk-e2e-secret-0007") // in the server's and the executor's environments
	ws := nobodyReachable(t, t.TempDir())
	first := startSDKExecutor(t, command("http://"+px.addr, key.Key, "sdk-hands", ws))
	first.waitEvent(t, "registered", 20*time.Second)
	sess := s.newSession(t, agent.ID, envID)
	st := s.openStream(t, sess.ID)
	turn := func(script string) []frame {
		t.Helper()
		s.send(t, sess.ID, userMessage(script))
		return st.until(isIdle)
	}

	// Tool results reach the model: bash writes, the custom read reads.
	got := turn(`@tool bash {"command":"echo hello-from-sdk > f.txt; cat f.txt"}
@tool read {"file_path":"f.txt"}
@then done`)
	results := resultFrames(got)
	if len(results) != 2 || resultText(results[0]) != "hello-from-sdk\n" || resultText(results[1]) != "hello-from-sdk\n" {
		t.Fatalf("results %v (%v)", describe(results), types(got))
	}
	for _, r := range results {
		if r.IsError != nil && *r.IsError {
			t.Fatalf("error result %s", resultText(r))
		}
	}
	if m, _ := filepath.Glob(filepath.Join(ws, sess.ID, "f.txt")); len(m) != 1 {
		t.Fatal("f.txt is not in the executor's session directory")
	}

	// The SDK's bash runs sandboxed: its own user, no /etc/shadow, neither
	// the server's environment (this process) nor the executor's.
	results = resultFrames(turn(fmt.Sprintf(`@tool bash {"command":"id -u; cat /etc/shadow; cat /proc/%d/environ; env"}`, os.Getpid()) + "\n@then done"))
	if len(results) != 1 {
		t.Fatalf("sandbox probe: %v", describe(results))
	}
	if out := resultText(results[0]); !strings.HasPrefix(out, "1000\n") || strings.Contains(out, "root:") || strings.Contains(out, "sdk-e2e-secret-0007") {
		t.Fatalf("the SDK's bash is not sandboxed:\n%s", out)
	}

	// A handler's RPC error keeps its code and reason on the wire.
	results = resultFrames(turn(`@tool write {"file_path":"x","content":"y"}` + "\n@then done"))
	if len(results) != 1 || results[0].IsError == nil || !*results[0].IsError ||
		!strings.Contains(resultText(results[0]), "-32001") || !strings.Contains(resultText(results[0]), "workspace_read_only") ||
		!strings.Contains(resultText(results[0]), "this executor refuses writes") {
		t.Fatalf("write refused: %v", describe(results))
	}

	// A socket cut mid-tool: the result arrives once, after the reconnect.
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"sleep 1.5; echo ran >> count.txt; echo cut-done"}`+"\n@then done"))
	cutCall := toolUse(t, st)
	first.waitCall(t, "tool_started", cutCall, 20*time.Second)
	px.hold(true) // the result is made while the executor cannot reconnect
	if n := px.cut(); n == 0 {
		t.Fatal("no connection to cut")
	}
	first.waitEvent(t, "disconnected", 10*time.Second)
	first.waitCall(t, "tool_finished", cutCall, 10*time.Second)
	px.hold(false)
	first.waitEvent(t, "registered", 10*time.Second)
	got = st.until(isIdle)
	results = resultFrames(got)
	if len(results) != 1 || strings.TrimSpace(resultText(results[0])) != "cut-done" {
		t.Fatalf("after the cut: %v (%v)", describe(results), types(got))
	}
	if b, _ := os.ReadFile(filepath.Join(ws, sess.ID, "count.txt")); string(b) != "ran\n" {
		t.Fatalf("count.txt %q: the tool ran more than once or not at all", b)
	}
	for _, r := range s.listAll(t, sess.ID) {
		if r.Type == "agent.tool_result" && strings.Contains(resultText(frame{Event: r}), "cut-done") && r.ID != results[0].ID {
			t.Fatalf("a second result for the cut call: %+v", r)
		}
	}

	// An interrupt reaches the handler as tool.cancel (last: the scripted
	// model reads the turn after an interrupt as a turn after tools).
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"sleep 30"}`+"\n@then done"))
	use := toolUse(t, st)
	first.waitCall(t, "tool_started", use, 20*time.Second)
	s.send(t, sess.ID, interruptEvent())
	first.waitCall(t, "tool_canceled", use, 10*time.Second)
	first.waitCall(t, "aborted", use, 10*time.Second)
	st.until(isIdle)

	// A second executor with the same name replaces the first: 4004.
	second := startSDKExecutor(t, command("http://"+px.addr, key.Key, "sdk-hands", nobodyReachable(t, t.TempDir())))
	end := first.waitEnd(t, 20*time.Second)
	if end.Ended != "ReplacedError" || end.CloseCode != 4004 {
		t.Fatalf("first executor ended %+v, want ReplacedError 4004", end)
	}
	second.waitEvent(t, "registered", 20*time.Second)

	// Revoking the key ends the client with the credential-rejected error.
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+envID+"/keys/"+key.ID+"/revoke", nil, nil); err != nil {
		t.Fatal(err)
	}
	end = second.waitEnd(t, 20*time.Second)
	if end.Ended != "CredentialRejectedError" || !strings.Contains(end.Message, "revoked") {
		t.Fatalf("after the revocation: %+v, want CredentialRejectedError naming the revocation", end)
	}
}

// nobodyReachable lets the sandboxes of an SDK executor that runs as root,
// which run as nobody, reach dir (a t.TempDir: it and its parent are
// private), and returns it.
func nobodyReachable(t *testing.T, dir string) string {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func resultFrames(fs []frame) []frame {
	var out []frame
	for _, f := range fs {
		if f.Type == "agent.tool_result" {
			out = append(out, f)
		}
	}
	return out
}

func resultText(f frame) string {
	var b strings.Builder
	for _, c := range f.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func describe(fs []frame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, resultText(f))
	}
	return out
}

// sdkLine is one line an SDK e2e executor or agent end prints.
type sdkLine struct {
	Event      string `json:"event"`
	ToolCallID string `json:"tool_call_id"`
	Tool       string `json:"tool"`
	Ended      string `json:"ended"`
	CloseCode  int    `json:"close_code"`
	Message    string `json:"message"`
	// Agent ends.
	Text             string `json:"text"`
	Transcript       int    `json:"transcript"`
	Code             int    `json:"code"`
	ExpectedSequence int    `json:"expected_sequence"`
	OK               bool   `json:"ok"`
	Error            string `json:"error"`
	Reason           string `json:"reason"`
	ErrorCode        string `json:"error_code"`
}

type sdkExecutor struct {
	lines chan sdkLine
	mu    sync.Mutex
	out   strings.Builder
}

// startSDKExecutor starts cmd and reads its JSON lines.
func startSDKExecutor(t *testing.T, cmd *exec.Cmd) *sdkExecutor {
	t.Helper()
	e := &sdkExecutor{lines: make(chan sdkLine, 1000)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.out.Write(p)
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(e.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			e.mu.Lock()
			e.out.WriteString(sc.Text() + "\n")
			e.mu.Unlock()
			var l sdkLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				e.lines <- l
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		<-read
		if t.Failed() {
			e.mu.Lock()
			t.Logf("executor output:\n%s", e.out.String())
			e.mu.Unlock()
		}
	})
	return e
}

// toolUse waits for the next agent.tool_use on st and returns its ID, the
// executor's tool_call_id.
func toolUse(t *testing.T, st *stream) string {
	t.Helper()
	got := st.until(func(f frame) bool { return f.Type == "agent.tool_use" })
	return got[len(got)-1].ID
}

// waitEvent returns the next line reporting event, skipping others.
func (e *sdkExecutor) waitEvent(t *testing.T, event string, timeout time.Duration) sdkLine {
	t.Helper()
	return e.waitCall(t, event, "", timeout)
}

// waitCall returns the next line reporting event for the tool call id (any if "").
func (e *sdkExecutor) waitCall(t *testing.T, event, id string, timeout time.Duration) sdkLine {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-e.lines:
			if !ok {
				t.Fatalf("the executor exited before %q", event)
			}
			if l.Event == event && (id == "" || l.ToolCallID == id) {
				return l
			}
			if l.Ended != "" {
				t.Fatalf("the executor ended (%+v) before %q", l, event)
			}
		case <-deadline:
			t.Fatalf("no %q from the executor within %v", event, timeout)
		}
	}
}

// waitEnd returns the line with which the executor reports its end.
func (e *sdkExecutor) waitEnd(t *testing.T, timeout time.Duration) sdkLine {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-e.lines:
			if !ok {
				t.Fatal("the executor exited without saying why")
			}
			if l.Ended != "" {
				return l
			}
		case <-deadline:
			t.Fatalf("the executor still runs after %v", timeout)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
