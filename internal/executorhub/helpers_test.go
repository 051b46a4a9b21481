package executorhub

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("REINS_TEST_EXECUTOR_PROCESS") != "" {
		runExecutorProcess() // the child of TestExecutorProcessKilledMidTool
		return
	}
	goleak.VerifyTestMain(m)
}

// memCredentials is an in-memory Credentials: hashes to ids.
type memCredentials struct {
	mu       sync.Mutex
	envKeys  map[string]string
	machines map[string]string
}

func (m *memCredentials) VerifyEnvironmentKey(ctx context.Context, keyHash string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.envKeys[keyHash]; ok {
		return id, nil
	}
	return "", executor.ErrCredentialRejected
}

func (m *memCredentials) VerifyMachineToken(ctx context.Context, tokenHash string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.machines[tokenHash]; ok {
		return id, nil
	}
	return "", executor.ErrCredentialRejected
}

func (m *memCredentials) revoke(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.envKeys, HashSecret(key))
	delete(m.machines, HashSecret(key))
}

type fixture struct {
	t      *testing.T
	hub    *Hub
	srv    *httptest.Server
	creds  *memCredentials
	envKey string
	mtok   string
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("EXECUTOR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newFixture runs a hub behind a real loopback HTTP server.
func newFixture(t *testing.T, opts HubOptions) *fixture {
	t.Helper()
	key, keyHash := NewEnvironmentKey()
	mt, mtHash := NewMachineToken()
	creds := &memCredentials{envKeys: map[string]string{keyHash: "env_1"}, machines: map[string]string{mtHash: "machine_1"}}
	opts.Credentials = creds
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	h := NewHub(opts)
	srv := httptest.NewServer(h)
	f := &fixture{t: t, hub: h, srv: srv, creds: creds, envKey: key, mtok: mt}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Stop(ctx)
		srv.Close()
	})
	return f
}

// client starts a client against the fixture; it is stopped at cleanup.
func (f *fixture) client(opts executor.Options) *executor.Client {
	f.t.Helper()
	if opts.URL == "" {
		opts.URL = f.srv.URL
	}
	if opts.EnvironmentKey == "" && opts.MachineToken == "" && opts.TokenSource == nil {
		opts.EnvironmentKey = f.envKey
	}
	if opts.Workspace == "" && opts.Sessions == nil {
		opts.Workspace = f.t.TempDir()
	}
	if opts.Executor.Name == "" {
		opts.Executor.Name = "exec-a"
	}
	if opts.BackoffMin == 0 {
		opts.BackoffMin = 5 * time.Millisecond
		opts.BackoffMax = 50 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(f.t)
	}
	c := executor.NewClient(opts)
	go c.Run(context.Background())
	f.t.Cleanup(func() {
		c.Stop()
		<-c.Done()
	})
	return c
}

// waitExecutor waits until n executors are registered for env_1.
func (f *fixture) waitExecutors(n int) {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := f.hub.Changed("env_1")
		count := 0
		for _, e := range f.hub.Executors() {
			if e.EnvironmentID == "env_1" {
				count++
			}
		}
		if count >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %d executors", n)
		}
	}
}

func (f *fixture) assign(sessionID string, tools ...string) *Lease {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ch := f.hub.Changed("env_1")
		l, err := f.hub.Assign(ctx, AssignRequest{EnvironmentID: "env_1", SessionID: sessionID, Tools: tools})
		if err == nil {
			return l
		}
		if !errors.Is(err, ErrNoExecutor) {
			f.t.Fatalf("Assign: %v", err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			f.t.Fatalf("Assign: %v", err)
		}
	}
}

func input(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func waitErr(t *testing.T, c *executor.Client) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(15 * time.Second):
		t.Fatal("client did not end")
		return nil
	}
}
