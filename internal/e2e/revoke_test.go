package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/httpapi"
)

// TestRevokedEnvironmentKeyCutsItsExecutor: revoking an environment key
// disconnects the real `reins executor` connected with it within a second
// (its token is still valid for minutes), the executor stops, and a new
// session's bash does not run on it.
func TestRevokedEnvironmentKeyCutsItsExecutor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs reins executor")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, options{})
	envID, _ := s.selfHosted(t, "revoked hands")
	var key struct{ ID, Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+envID+"/keys", nil, &key); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	cmd := exec.Command(bin, "executor", "--url", s.url, "--environment-key", key.Key, "--workspace", ws, "--name", "revoked")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("reins executor output:\n%s", out.String())
		}
	})
	waitExecutors(t, s, envID, 1, 20*time.Second)

	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+envID+"/keys/"+key.ID+"/revoke", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitExecutors(t, s, envID, 0, time.Second)

	// It does not come back: its token is refused, then its key.
	select {
	case err := <-exited:
		exited <- err
		if err == nil {
			t.Fatal("reins executor exited 0 after its key was revoked")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reins executor still runs 10 s after its key was revoked")
	}
	if !strings.Contains(out.String(), "revoked") {
		t.Errorf("the executor does not say its key was revoked:\n%s", out.String())
	}

	// A new session's bash runs nowhere: the session waits for an executor.
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, envID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"touch ran-after-revoke"}`+"\n@then done"))
	st.until(func(f frame) bool { return f.Type == "session.status_rescheduled" })
	if m, _ := filepath.Glob(filepath.Join(ws, "*", "ran-after-revoke")); len(m) > 0 {
		t.Fatalf("bash ran on the revoked executor: %v", m)
	}
}

// waitExecutors waits until the hub has n executors registered in the
// environment.
func waitExecutors(t *testing.T, s *server, envID string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := 0
		for _, e := range s.app.Hub.Executors() {
			if e.EnvironmentID == envID {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d executors in %s after %v, want %d", got, envID, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRevokedKeysEndTheirStreams: an SSE stream ends, with an error event
// the SDK raises, once the API key that opened it is revoked (from the
// store, as `reins keys revoke` does from another process) and once the
// environment key that opened a worker's stream is revoked.
func TestRevokedKeysEndTheirStreams(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	envID, _ := s.selfHosted(t, "streams")
	var ek struct{ ID, Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+envID+"/keys", nil, &ek); err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, envID)

	apiKey, k, err := httpapi.CreateKey(ctx, s.app.Store, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	byAPIKey := s.as(apiKey).openStream(t, sess.ID)
	byEnvKey := s.as(ek.Key).openStream(t, sess.ID)
	time.Sleep(1500 * time.Millisecond) // both streams survive rechecks while their keys hold
	for name, st := range map[string]*stream{"API key": byAPIKey, "environment key": byEnvKey} {
		for len(st.ch) > 0 {
			if f, ok := <-st.ch; !ok || f.Type != "ping" {
				t.Fatalf("%s stream: %q (open %v) before any revocation", name, f.Type, ok)
			}
		}
	}

	if err := s.app.Store.RevokeAPIKey(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, "API key", byAPIKey, "revoked", 3*time.Second)

	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+envID+"/keys/"+ek.ID+"/revoke", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, "environment key", byEnvKey, "revoked", 3*time.Second)
}

// as returns s with a client that authenticates with key.
func (s *server) as(key string) *server {
	c := *s
	c.client = anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &c
}

// waitEnded waits for st to end with an error that mentions want.
func waitEnded(t *testing.T, name string, st *stream, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-st.ch:
			if ok {
				continue // pings
			}
			err := <-st.errc
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s stream ended with %v, want an error mentioning %q", name, err, want)
			}
			return
		case <-deadline:
			t.Fatalf("%s stream still open %v after its key was revoked", name, timeout)
		}
	}
}

// TestArchivedEnvironmentsKeyIsRefused: once its environment is archived,
// an environment key reads nothing, work/stats included.
func TestArchivedEnvironmentsKeyIsRefused(t *testing.T) {
	s := start(t, options{})
	envID, key := s.selfHosted(t, "archived")
	if code, err := callBearer(s.url, key, "GET", "/v1/environments/"+envID+"/work/stats", nil, nil); err != nil || code != 200 {
		t.Fatalf("work/stats before archiving: %d %v", code, err)
	}
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+envID+"/archive", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/work/stats", "/work/poll", "/work"} {
		code, err := callBearer(s.url, key, "GET", "/v1/environments/"+envID+path, nil, nil)
		if code != 401 || !strings.Contains(fmt.Sprint(err), "archived") {
			t.Errorf("%s with an archived environment's key: %d %v, want 401 naming the archive", path, code, err)
		}
	}
}
