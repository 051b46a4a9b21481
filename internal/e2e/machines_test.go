package e2e

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/executorhub"
)

// machineView is a machine as the API shows it.
type machineView struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	EnvironmentIDs []string `json:"environment_ids"`
	Token          string   `json:"token"`
	Hint           string   `json:"hint"`
	RevokedAt      *string  `json:"revoked_at"`
}

// TestMachineTokens: a machine token made by the API (scoped to
// environments, shown once) is exchanged for executor tokens, and is 403
// permission_error on the rest of the API;
// an executor connected with it that declares neither process nor agent is
// refused (-32012 capability_missing, close 4002, ErrRegistrationRefused),
// one that declares process registers as the machine's; revoking the
// machine cuts it off and its token is refused from then on.
func TestMachineTokens(t *testing.T) {
	s := start(t, options{})
	envID, _ := s.selfHosted(t, "machine hands")
	for _, bad := range []map[string]any{
		{"environment_ids": []string{envID}},
		{"name": "m"},
		{"name": "m", "environment_ids": []string{"env_missing"}},
	} {
		if status, err := call(s.url, s.key, "POST", "/v1/machines", bad, nil); status != 400 {
			t.Errorf("POST /v1/machines %v: %d %v, want 400", bad, status, err)
		}
	}
	var m machineView
	if _, err := call(s.url, s.key, "POST", "/v1/machines", map[string]any{"name": "build-01", "environment_ids": []string{envID, envID}}, &m); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Token, executorhub.MachineTokenPrefix) || len(m.EnvironmentIDs) != 1 || m.EnvironmentIDs[0] != envID || m.Hint != m.Token[len(m.Token)-4:] {
		t.Fatalf("created machine = %+v", m)
	}
	var list struct{ Data []machineView }
	if _, err := call(s.url, s.key, "GET", "/v1/machines", nil, &list); err != nil || len(list.Data) != 1 || list.Data[0].Token != "" || list.Data[0].ID != m.ID {
		t.Fatalf("list = %+v %v (the token is shown once)", list, err)
	}
	if status, err := callWith(s.url, "GET", "/v1/machines", nil, nil, func(h map[string]string) { h["x-api-key"] = m.Token }); status != 403 || !strings.Contains(err.Error(), `"permission_error"`) {
		t.Fatalf("a machine token used as an API key: %d %v, want 403 permission_error", status, err)
	}

	// Neither process nor agent: refused at registration.
	refused := machineClient(t, s.url, m.Token, "no-process", []string{"tool:bash"})
	err := waitClientErr(t, refused)
	var re *executor.RPCError
	if !errors.Is(err, executor.ErrRegistrationRefused) || !errors.As(err, &re) || executor.CloseCode(err) != executor.CloseRegistrationRefused {
		t.Fatalf("Err = %v (close %d), want ErrRegistrationRefused wrapping -32012 after close 4002", err, executor.CloseCode(err))
	}
	if re.Code != executor.CodeCapabilityUnavailable || re.Reason() != executor.ReasonCapabilityMissing {
		t.Fatalf("refusal = %d %+v, want -32012 capability_missing", re.Code, re.Data)
	}

	// With process: registered as the machine's executor.
	ok := machineClient(t, s.url, m.Token, "with-process", []string{executor.CapabilityProcess})
	waitMachineExecutors(t, s, m.ID, 1, 10*time.Second)

	if _, err := call(s.url, s.key, "POST", "/v1/machines/"+m.ID+"/revoke", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitMachineExecutors(t, s, m.ID, 0, time.Second)
	if err := waitClientErr(t, ok); !errors.Is(err, executor.ErrCredentialRejected) {
		t.Fatalf("Err after revocation = %v, want ErrCredentialRejected", err)
	}
	if status, _ := callWith(s.url, "POST", "/v1/executor/tokens", map[string]any{"executor": map[string]string{"name": "x"}}, nil,
		func(h map[string]string) { h["authorization"] = "Bearer " + m.Token }); status != 401 {
		t.Fatalf("token exchange with a revoked machine token: %d, want 401", status)
	}
	if status, _ := callWith(s.url, "GET", "/v1/machines", nil, nil, func(h map[string]string) { h["x-api-key"] = m.Token }); status != 401 {
		t.Fatalf("a revoked machine token on the API: %d, want 401", status)
	}
	var got machineView
	if _, err := call(s.url, s.key, "GET", "/v1/machines/"+m.ID, nil, &got); err != nil || got.RevokedAt == nil {
		t.Fatalf("revoked machine = %+v %v", got, err)
	}
}

// machineClient runs an executor SDK client with a machine token.
func machineClient(t *testing.T, url, token, name string, caps []string) *executor.Client {
	t.Helper()
	hc := ownHTTPClient(t)
	c := executor.NewClient(executor.Options{URL: url, MachineToken: token, Executor: executor.ExecutorInfo{Name: name}, HTTPClient: hc,
		Capabilities: caps, Sessions: &executor.BuiltinSessions{Dir: t.TempDir()}, MaxRefusedRegistrations: 1,
		BackoffMin: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); c.Stop(); <-done })
	return c
}

// waitClientErr waits for the client to end and returns why.
func waitClientErr(t *testing.T, c *executor.Client) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(15 * time.Second):
		t.Fatal("the executor client still runs after 15 s")
		return nil
	}
}

// waitMachineExecutors waits until the hub has n executors of the machine.
func waitMachineExecutors(t *testing.T, s *server, machineID string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := 0
		for _, e := range s.app.Hub.Executors() {
			if e.MachineID == machineID {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d executors of machine %s after %v, want %d", got, machineID, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownHTTPClient returns an HTTP client whose connections are closed at
// cleanup, after the cleanups registered later (the executor clients
// using it) and before the server's shutdown, which would otherwise wait
// for a connection dialed but never used. The default transport's idle
// connections (call's) are closed then too.
func ownHTTPClient(t *testing.T) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return &http.Client{Transport: tr}
}
