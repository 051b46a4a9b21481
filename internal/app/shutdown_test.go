package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/pkgmirror"
	"github.com/reinsdev/reins/internal/toolhost"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestShutdownLeavesNoGoroutine starts the whole server on a SQLite data
// dir, runs a session whose agent calls bash in a cloud environment whose
// pip package must be installed first, and shuts the server down while
// the install waits on a stalled mirror: Shutdown cancels the install
// (it fails with context.Canceled before Shutdown returns, and leaves
// neither a layer nor a staging directory), and no goroutine the server
// started outlives it. The next start installs the package anew and the
// session's next bash call uses it; that server's shutdown leaves no
// goroutine either.
func TestShutdownLeavesNoGoroutine(t *testing.T) {
	mirror := pkgmirror.New(t, "", "reinsdemo", "reins-demo")
	front := newStallingMirror(mirror.URL)
	defer front.close()
	ignore := goleak.IgnoreCurrent() // the mirrors' listeners
	dir := t.TempDir()
	var logs syncBuffer
	cfg := Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sandbox:  toolhost.SandboxConfig{EgressAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		Packages: toolhost.PackagesConfig{PipIndexURL: front.srv.URL + "/simple/"}}

	front.stall.Store(true)
	s := startServer(t, cfg)
	env := s.post(t, "/v1/environments", map[string]any{"name": "env", "config": map[string]any{"type": "cloud",
		"packages": map[string]any{"type": "packages", "pip": []string{"reinsdemo==1.0"}}}})
	agent := s.post(t, "/v1/agents", map[string]any{"name": "a", "model": "scripted",
		"tools": []any{map[string]any{"type": "agent_toolset_20260401"}}})
	sess := s.post(t, "/v1/sessions", map[string]any{"agent": agent, "environment_id": env})
	s.bash(t, sess, `python3 -c 'import reinsdemo; print("py", reinsdemo.VALUE)'`)
	select {
	case <-front.stalled:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the install never asked the mirror; log:\n%s", logs.String())
	}
	s.stop(t)
	if log := logs.String(); !strings.Contains(log, "installing packages failed") || !strings.Contains(log, "context canceled") {
		t.Errorf("the install in flight was not cancelled before Shutdown returned; log:\n%s", log)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "packages")); len(left) != 0 {
		t.Errorf("the cancelled install left %v", left)
	}
	front.stall.Store(false)
	front.idle()
	goleak.VerifyNone(t, ignore)

	s = startServer(t, cfg)
	s.bash(t, sess, `python3 -c 'import reinsdemo; print("py", reinsdemo.VALUE)'`)
	if out := s.waitResult(t, sess, "py 42"); out == "" {
		t.Fatalf("the next start did not install the package; log:\n%s", logs.String())
	}
	s.stop(t)
	front.idle()
	goleak.VerifyNone(t, ignore)
}

// stallingMirror is a front of a package mirror that, while stall is
// set, holds every request until its client goes away.
type stallingMirror struct {
	srv       *httptest.Server
	transport *http.Transport
	stall     atomic.Bool
	stalled   chan struct{} // receives when a request is held
}

func newStallingMirror(target string) *stallingMirror {
	u, _ := url.Parse(target)
	m := &stallingMirror{transport: &http.Transport{}, stalled: make(chan struct{}, 1)}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = m.transport
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.stall.Load() {
			select {
			case m.stalled <- struct{}{}:
			default:
			}
			<-r.Context().Done()
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return m
}

// idle closes the idle connections to the mirror behind.
func (m *stallingMirror) idle() { m.transport.CloseIdleConnections() }

func (m *stallingMirror) close() {
	m.srv.Close()
	m.idle()
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is a started App and a client of its API.
type testServer struct {
	a      *App
	url    string
	key    string
	client *http.Client
}

// startServer starts an App on cfg; stop shuts it down.
func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	ctx := context.Background()
	a, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := httpapi.CreateKey(ctx, a.Store, "test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, ln); err != nil {
		a.Shutdown(ctx)
		t.Fatal(err)
	}
	return &testServer{a: a, url: "http://" + ln.Addr().String(), key: key,
		client: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}}
}

// stop shuts the server down within 30 s.
func (s *testServer) stop(t *testing.T) {
	t.Helper()
	s.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.a.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// do sends one API request and decodes a 200's body into out.
func (s *testServer) do(t *testing.T, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("x-api-key", s.key)
	req.Header.Set("content-type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
	}
}

// post creates a resource and returns its id.
func (s *testServer) post(t *testing.T, path string, body any) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	s.do(t, "POST", path, body, &out)
	return out.ID
}

// bash sends a user message whose scripted turn calls bash with command.
func (s *testServer) bash(t *testing.T, sessionID, command string) {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"command": command})
	script := fmt.Sprintf("@tool bash %s\n@then done", in)
	s.do(t, "POST", "/v1/sessions/"+sessionID+"/events", map[string]any{"events": []any{map[string]any{"type": "user.message",
		"content": []any{map[string]any{"type": "text", "text": script}}}}}, nil)
}

// waitResult waits up to 2 minutes for a tool result of the session
// holding want, and returns its text ("" if none came).
func (s *testServer) waitResult(t *testing.T, sessionID, want string) string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var page struct {
			Data []ma.Event `json:"data"`
		}
		s.do(t, "GET", "/v1/sessions/"+sessionID+"/events?limit=1000&types[]=agent.tool_result", nil, &page)
		for _, ev := range page.Data {
			for _, c := range ev.Content {
				if strings.Contains(c.Text, want) {
					return c.Text
				}
			}
		}
	}
	return ""
}
