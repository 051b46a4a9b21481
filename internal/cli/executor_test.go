package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/tool"
)

type testCreds struct{ hash string }

func (c testCreds) VerifyEnvironmentKey(_ context.Context, h string) (string, error) {
	if h == c.hash {
		return "env_1", nil
	}
	return "", executor.ErrCredentialRejected
}

func (testCreds) VerifyMachineToken(context.Context, string) (string, error) {
	return "", executor.ErrCredentialRejected
}

// syncBuffer is a bytes.Buffer safe for the command's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
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

func TestExecutorCommand(t *testing.T) {
	key, hash := executorhub.NewEnvironmentKey()
	hub := executorhub.NewHub(executorhub.HubOptions{Credentials: testCreds{hash}})
	srv := httptest.NewServer(hub)
	defer srv.Close()
	defer hub.Stop(context.Background())

	t.Run("rejected key exits with a clear error", func(t *testing.T) {
		cmd := newExecutorCommand()
		out := &syncBuffer{}
		cmd.SetErr(out)
		cmd.SetArgs([]string{"--url", srv.URL, "--environment-key", "reins_ek_wrong", "--workspace", t.TempDir()})
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), "environment key was rejected") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("serves tools and stops on interrupt", func(t *testing.T) {
		ws := t.TempDir()
		t.Setenv("REINS_URL", srv.URL)
		t.Setenv("REINS_ENVIRONMENT_KEY", key)
		cmd := newExecutorCommand()
		out := &syncBuffer{}
		cmd.SetErr(out)
		cmd.SetArgs([]string{"--workspace", ws, "--name", "cli", "--confirm", "--confirm-timeout", "200ms"})
		cmd.SetIn(strings.NewReader("n\n"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		var lease *executorhub.Lease
		deadline := time.Now().Add(10 * time.Second)
		for {
			l, err := hub.Assign(ctx, executorhub.AssignRequest{EnvironmentID: "env_1", SessionID: "s1", Tools: []string{"bash", "read"}})
			if err == nil {
				lease = l
				break
			}
			if !errors.Is(err, executorhub.ErrNoExecutor) || time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// --confirm: the first mutating call is denied ("n"), the second
		// expires (no more input).
		in, _ := json.Marshal(map[string]string{"command": "echo hi"})
		res, err := lease.CallTool(ctx, tool.Call{ID: "c1", Name: "bash", Input: in})
		if err != nil || res.ErrorCode != executor.ReasonLocalConfirmationDenied {
			t.Fatalf("denied call: %v %+v", err, res)
		}
		res, err = lease.CallTool(ctx, tool.Call{ID: "c2", Name: "bash", Input: in})
		if err != nil || res.ErrorCode != executor.ReasonLocalConfirmationExpired {
			t.Fatalf("expired call: %v %+v", err, res)
		}
		// Reads are not confirmed.
		res, err = lease.CallTool(ctx, tool.Call{ID: "c3", Name: "read", Input: json.RawMessage(`{"file_path":"none"}`)})
		if err != nil || res.ErrorCode != "not_found" {
			t.Fatalf("read: %v %+v", err, res)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("command after interrupt: %v", err)
		}
		for _, want := range []string{"connected: serving", "session s1 assigned", "bash [s1] error local_confirmation_denied"} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}
