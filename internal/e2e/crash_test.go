package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/testnet"
	ma "github.com/reinsdev/reins/managedagents"
)

// buildReins builds cmd/reins once per test binary, into the user's cache
// dir: go build leaves a binary that is up to date as it is, so a run
// after the first skips the link (half a minute on a loaded machine). The
// directory is the checkout's own (named by a hash of its path): checkouts
// of other versions on the machine must not run each other's binary.
var buildReins = sync.OnceValues(func() (string, error) {
	return buildBinary("github.com/reinsdev/reins/cmd/reins", "reins")
})

// buildBinary builds the package pkg into a directory of the user's cache
// per checkout (its working directory's hash), so that tests of several
// checkouts on one machine do not run each other's binaries.
func buildBinary(pkg, name string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(wd))
	dir := filepath.Join(cache, "reins-e2e", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// child is a reins serve process.
type child struct {
	cmd *exec.Cmd
	url string
}

// freeAddr returns a loopback address for a child reins serve.
func freeAddr(t *testing.T) string { return testnet.FreeAddr(t) }

// startChild starts a reins serve on dataDir and addr, with the
// bootstrap key key and the defaults otherwise, and waits until it
// answers /healthz.
func startChild(t *testing.T, bin, dataDir, addr, key string) *child {
	t.Helper()
	return startChildCmd(t, exec.Command(bin, serveArgs(dataDir, addr)...), addr, key)
}

// serveArgs are the arguments of a reins serve on dataDir and addr.
func serveArgs(dataDir, addr string) []string {
	return []string{"serve", "--addr", addr, "--data-dir", dataDir, "--log-level", "warn"}
}

// startChildCmd starts cmd, a reins serve on addr, with the bootstrap key
// key, and waits until it answers /healthz.
func startChildCmd(t *testing.T, cmd *exec.Cmd, addr, key string) *child {
	t.Helper()
	cmd.Env = append(os.Environ(), "REINS_API_KEY="+key, "ANTHROPIC_API_KEY=")
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return runChild(t, cmd, addr, &stderr)
}

// runChild starts cmd, a reins serve at addr, and waits until it serves;
// stderr is its standard error, for the failure's message.
func runChild(t *testing.T, cmd *exec.Cmd, addr string, stderr fmt.Stringer) *child {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, url: "http://" + addr}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(c.url + "/healthz"); err == nil {
			resp.Body.Close()
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatalf("reins serve did not become ready: %s", stderr.String())
	return nil
}

func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
}

// call does one API request with an API key.
func call(url, key, method, path string, body any, out any) (status int, err error) {
	return callWith(url, method, path, body, out, func(h map[string]string) { h["x-api-key"] = key })
}

// callWith does one API request with the headers auth sets.
func callWith(url, method, path string, body, out any, auth func(map[string]string)) (status int, err error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	h := map[string]string{}
	auth(h)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	req.Header.Set("content-type", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, err
		}
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return 200, nil
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	key := "sk-reins-crash-test-key"
	addr := freeAddr(t)
	c := startChild(t, bin, dataDir, addr, key)

	var agent ma.Agent
	if _, err := call(c.url, key, "POST", "/v1/agents", map[string]any{"name": "crash", "model": "scripted"}, &agent); err != nil {
		t.Fatal(err)
	}
	var env ma.Environment
	if _, err := call(c.url, key, "POST", "/v1/environments", map[string]any{"name": "crash"}, &env); err != nil {
		t.Fatal(err)
	}
	const sessions = 6
	var sids []string
	for range sessions {
		var s ma.Session
		if _, err := call(c.url, key, "POST", "/v1/sessions", map[string]any{"agent": agent.ID, "environment_id": env.ID}, &s); err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}

	acked := map[string]string{} // event id -> session
	rng := rand.New(rand.NewPCG(1, 2))
	const rounds = 8
	for round := range rounds {
		stop := make(chan struct{})
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, sid := range sids {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					text := fmt.Sprintf("round %d message %d", round, i)
					if i%3 == 0 {
						text = "@sleep 30ms\n@text slow reply " + text
					}
					var echo struct{ Data []ma.Event }
					body := map[string]any{"events": []any{map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": text}}}}}
					if _, err := call(c.url, key, "POST", "/v1/sessions/"+sid+"/events", body, &echo); err != nil {
						return // the server is gone
					}
					mu.Lock()
					for _, e := range echo.Data {
						acked[e.ID] = sid
					}
					mu.Unlock()
					time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // the global source is safe for concurrent use
				}
			})
		}
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		c.kill()
		close(stop)
		wg.Wait()
		c = startChild(t, bin, dataDir, addr, key)
	}

	// Let every session finish.
	deadline := time.Now().Add(60 * time.Second)
	for {
		busy := 0
		for _, sid := range sids {
			var s ma.Session
			if _, err := call(c.url, key, "GET", "/v1/sessions/"+sid, nil, &s); err != nil {
				t.Fatal(err)
			}
			var evs struct{ Data []ma.Event }
			call(c.url, key, "GET", "/v1/sessions/"+sid+"/events?limit=1000&order=desc", nil, &evs)
			queued := false
			for _, e := range evs.Data {
				if e.Type == ma.EventUserMessage && e.ProcessedAt == nil {
					queued = true
				}
			}
			if s.Status != ma.StatusIdle || queued {
				busy++
			}
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still busy after restart", busy)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopChild(t, c)

	// Check the log file itself.
	st, err := sqlite.Open(context.Background(), filepath.Join(dataDir, "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	totalTurns := 0
	for _, sid := range sids {
		log, err := st.ReadLog(context.Background(), sid, 0, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range log {
			if e.Seq != int64(i+1) {
				t.Fatalf("session %s: seq %d at position %d (gap or reuse)", sid, e.Seq, i)
			}
		}
		live, err := st.ListEvents(context.Background(), sid, store.EventQuery{Limit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		replies, turns, starts, ends := 0, 0, 0, 0
		for _, e := range live {
			ev := e.Event
			if seen[ev.ID] {
				t.Fatalf("session %s: event %s listed twice", sid, ev.ID)
			}
			seen[ev.ID] = true
			switch ev.Type {
			case ma.EventUserMessage:
				if ev.ProcessedAt == nil {
					t.Fatalf("session %s: user.message %s never processed", sid, ev.ID)
				}
			case ma.EventAgentMessage:
				replies++
			case ma.EventStatusIdle:
				if ev.StopReason.Type != ma.StopEndTurn {
					t.Fatalf("session %s: idle %s", sid, ev.StopReason.Type)
				}
				turns++
			case ma.EventSpanModelRequestStart:
				starts++
			case ma.EventSpanModelRequestEnd:
				ends++
			}
		}
		if replies != turns || starts != ends {
			t.Fatalf("session %s: %d replies for %d turns; %d span starts, %d ends", sid, replies, turns, starts, ends)
		}
		totalTurns += turns
		for id, s := range acked {
			if s == sid && !seen[id] {
				t.Fatalf("acknowledged event %s of %s lost", id, sid)
			}
		}
	}
	if len(acked) < sessions*rounds || totalTurns == 0 {
		t.Fatalf("the test did too little: %d acknowledged sends, %d turns", len(acked), totalTurns)
	}
	t.Logf("%d kills, %d acknowledged sends, %d turns, all recovered", rounds, len(acked), totalTurns)
}

func stopChild(t *testing.T, c *child) {
	c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("reins serve exited with %v after SIGTERM; want a clean exit", err)
		}
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		t.Error("reins serve did not stop within 15 s of SIGTERM")
	}
}

func httpNewRequest(method, url, bearer string) (*http.Request, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	return req, nil
}

func httpDo(req *http.Request) (int, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// killable is a reins serve child process on a data directory of its
// own, which a test kills (SIGKILL) and starts again on the same
// directory, address and key.
type killable struct {
	*child
	t                   *testing.T
	bin, dir, addr, key string
}

// startKillable builds reins and starts a child with the key, skipping
// the test under -short; the child is killed when the test ends.
func startKillable(t *testing.T, key string) *killable {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	k := &killable{t: t, bin: bin, dir: t.TempDir(), addr: freeAddr(t), key: key}
	k.child = startChild(t, bin, k.dir, k.addr, key)
	t.Cleanup(func() { k.kill() })
	return k
}

// restart kills the child and starts another on its directory.
func (k *killable) restart() {
	k.t.Helper()
	k.kill()
	k.start()
}

// start starts a child on the directory (after a kill).
func (k *killable) start() {
	k.t.Helper()
	k.child = startChild(k.t, k.bin, k.dir, k.addr, k.key)
}

// do is call with the child's URL and key.
func (k *killable) do(method, path string, body, out any) {
	k.t.Helper()
	if _, err := call(k.url, k.key, method, path, body, out); err != nil {
		k.t.Fatal(err)
	}
}

// toolAgentInCloud creates an agent of the scripted model with the agent
// toolset and a cloud environment.
func (k *killable) toolAgentInCloud() (ma.Agent, ma.Environment) {
	k.t.Helper()
	var agent ma.Agent
	k.do("POST", "/v1/agents", map[string]any{"name": "tools", "model": "scripted",
		"tools": []any{map[string]any{"type": "agent_toolset_20260401"}}}, &agent)
	var env ma.Environment
	k.do("POST", "/v1/environments", map[string]any{"name": "cloud"}, &env)
	return agent, env
}
