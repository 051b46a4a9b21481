package executorhub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

func TestRegistrationRefused4002(t *testing.T) {
	var asked atomic.Int32
	f := newFixture(t, HubOptions{AllowRegistration: func(ctx context.Context, r Registration) error {
		asked.Add(1)
		return errors.New("environment archived")
	}})
	c := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps})
	err := waitErr(t, c)
	if !errors.Is(err, executor.ErrRegistrationRefused) || executor.CloseCode(err) != executor.CloseRegistrationRefused {
		t.Fatalf("Err = %v (close code %d), want executor.ErrRegistrationRefused after 4002", err, executor.CloseCode(err))
	}
	if n := asked.Load(); n != executor.DefaultMaxRefusedRegistrations {
		t.Fatalf("%d registrations, want %d", n, executor.DefaultMaxRefusedRegistrations)
	}
}

func TestRegistrationRefusedCapabilityMissing(t *testing.T) {
	f := newFixture(t, HubOptions{})
	// A machine-scoped executor without process or agent.
	c := f.client(executor.Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: testCaps, MaxRefusedRegistrations: 2})
	err := waitErr(t, c)
	var re *executor.RPCError
	if !errors.Is(err, executor.ErrRegistrationRefused) || !errors.As(err, &re) {
		t.Fatalf("Err = %v, want executor.ErrRegistrationRefused wrapping the -32012 error", err)
	}
	if re.Code != executor.CodeCapabilityUnavailable || re.Reason() != executor.ReasonCapabilityMissing || re.Data.Capability != executor.CapabilityProcess {
		t.Fatalf("refusal = %+v %+v", re, re.Data)
	}
	// With the process capability the same machine registers.
	ok := f.client(executor.Options{MachineToken: f.mtok, Sessions: &testSessions{}, Capabilities: append([]string{executor.CapabilityProcess}, testCaps...), Executor: executor.ExecutorInfo{Name: "m2"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := f.hub.WaitAssign(ctx, AssignRequest{EnvironmentID: "env_1", MachineID: "machine_1", SessionID: "s1", Tools: []string{"noop"}})
	if err != nil {
		t.Fatalf("placement on the machine: %v (client: %v)", err, ok.Err())
	}
	if res, err := l.CallTool(ctx, tool.Call{ID: "c1", Name: "noop"}); err != nil || res.IsError {
		t.Fatalf("CallTool on the machine: %v %+v", err, res)
	}
	if ex := f.hub.Executors(); len(ex) != 1 || ex[0].MachineID != "machine_1" {
		t.Fatalf("executors = %+v", ex)
	}
}

// TestUnsupportedProtocol4003: the hub answers an executor.register of
// another protocol version -32010 and closes with 4003 (the Go client's
// side, a stop for good, is tested in package executor).
func TestUnsupportedProtocol4003(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ws := f.rawConn(executor.Subprotocol)
	m := exchange(t, ws, `{"jsonrpc":"2.0","id":1,"method":"executor.register","params":{"protocol":"reins.executor.v0","executor":{"name":"old"},"capabilities":["tool:noop"],"max_sessions":1,"sessions":[]}}`)
	if m.Error == nil || m.Error.Code != executor.CodeUnsupportedProtocol {
		t.Fatalf("register answered %+v, want -32010", m.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := ws.Read(ctx); executor.CloseCode(err) != executor.CloseUnsupportedProtocol {
		t.Fatalf("after the refusal: %v (close %d), want 4003", err, executor.CloseCode(err))
	}
}

func TestReplaced4004(t *testing.T) {
	f := newFixture(t, HubOptions{})
	first := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps})
	f.waitExecutors(1)
	second := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps})
	err := waitErr(t, first)
	if !errors.Is(err, executor.ErrReplaced) || executor.CloseCode(err) != executor.CloseReplaced {
		t.Fatalf("first Err = %v (close %d), want executor.ErrReplaced/4004", err, executor.CloseCode(err))
	}
	time.Sleep(50 * time.Millisecond)
	if second.Err() != nil {
		t.Fatalf("second ended: %v", second.Err())
	}
	if ex := f.hub.Executors(); len(ex) != 1 {
		t.Fatalf("%d executors registered, want 1", len(ex))
	}
	if err := first.Call(context.Background(), executor.MethodHeartbeat, executor.HeartbeatParams{}, nil); !errors.Is(err, executor.ErrClientStopped) {
		t.Fatalf("Call on a replaced client = %v", err)
	}
}

func TestDrain4005Reconnects(t *testing.T) {
	key, keyHash := NewEnvironmentKey()
	creds := &memCredentials{envKeys: map[string]string{keyHash: "env_1"}}
	secret := []byte("shared secret of the two nodes")
	hub1 := NewHub(HubOptions{Credentials: creds, TokenSecret: secret, Logger: testLogger(t)})
	hub2 := NewHub(HubOptions{Credentials: creds, TokenSecret: secret, Logger: testLogger(t)})
	var cur atomic.Pointer[Hub]
	cur.Store(hub1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeHTTP(w, r) }))
	defer srv.Close()
	defer hub2.Stop(context.Background())
	closes := make(chan int, 10)
	c := executor.NewClient(executor.Options{URL: srv.URL, EnvironmentKey: key, Sessions: &testSessions{}, Capabilities: testCaps,
		Executor: executor.ExecutorInfo{Name: "x"}, BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond, Logger: testLogger(t),
		OnEvent: func(e executor.Event) {
			if e.Type == executor.EventDisconnected {
				closes <- executor.CloseCode(e.Err)
			}
		}})
	go c.Run(context.Background())
	defer func() { c.Stop(); <-c.Done() }()
	waitFor(t, func() bool { return len(hub1.Executors()) == 1 })
	cur.Store(hub2)
	if err := hub1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := <-closes; code != executor.CloseDrained {
		t.Fatalf("disconnected with %d, want 4005", code)
	}
	waitFor(t, func() bool { return len(hub2.Executors()) == 1 })
	if c.Err() != nil {
		t.Fatalf("client ended: %v", c.Err())
	}
}

func TestCredentialRejected(t *testing.T) {
	f := newFixture(t, HubOptions{})
	f.creds.revoke(f.envKey)
	var attempts atomic.Int32
	c := f.client(executor.Options{Sessions: &testSessions{}, Capabilities: testCaps, OnEvent: func(e executor.Event) {
		if e.Type == executor.EventConnecting {
			attempts.Add(1)
		}
	}})
	err := waitErr(t, c)
	if !errors.Is(err, executor.ErrCredentialRejected) || attempts.Load() != 1 {
		t.Fatalf("Err = %v after %d attempts, want executor.ErrCredentialRejected without retry", err, attempts.Load())
	}
}

func TestAssignRejectedAndPlacement(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ts := &testSessions{}
	ts.setRefuse(executor.ReasonWorkspaceUnavailable)
	f.client(executor.Options{Sessions: ts, Capabilities: testCaps, MaxSessions: 1})
	f.waitExecutors(1)
	ctx := context.Background()
	_, err := f.hub.Assign(ctx, AssignRequest{EnvironmentID: "env_1", SessionID: "s1", Tools: []string{"noop"}})
	if !errors.Is(err, ErrAssignRejected) {
		t.Fatalf("Assign = %v, want ErrAssignRejected", err)
	}
	if want := "workspace_unavailable: refused by the test"; !strings.Contains(err.Error(), want) {
		t.Errorf("Assign = %v, want the executor's reason and message (%q)", err, want)
	}
	// Tools the executor does not declare: no executor.
	_, err = f.hub.Assign(ctx, AssignRequest{EnvironmentID: "env_1", SessionID: "s2", Tools: []string{"bash"}})
	if !errors.Is(err, ErrNoExecutor) {
		t.Fatalf("Assign(bash) = %v, want ErrNoExecutor", err)
	}
	ts.setRefuse("")
	l := f.assign("s3", "noop")
	// max_sessions 1: the executor is full.
	_, err = f.hub.Assign(ctx, AssignRequest{EnvironmentID: "env_1", SessionID: "s4", Tools: []string{"noop"}})
	if !errors.Is(err, ErrNoExecutor) {
		t.Fatalf("Assign over max_sessions = %v, want ErrNoExecutor", err)
	}
	// An undeclared tool on a lease is a -32012 protocol error.
	_, err = l.CallTool(ctx, tool.Call{ID: "c1", Name: "bash"})
	var re *executor.RPCError
	if !errors.As(err, &re) || re.Code != executor.CodeCapabilityUnavailable || re.Data.Capability != "tool:bash" {
		t.Fatalf("CallTool(bash) = %v", err)
	}
	l.Release(ctx)
	// Room again once the executor has processed the release.
	waitFor(t, func() bool {
		l, err := f.hub.Assign(ctx, AssignRequest{EnvironmentID: "env_1", SessionID: "s4", Tools: []string{"noop"}})
		return err == nil && l != nil
	})
}

func TestNotConnected(t *testing.T) {
	c := executor.NewClient(executor.Options{URL: "http://127.0.0.1:1", EnvironmentKey: "reins_ek_x", Sessions: &testSessions{}})
	if err := c.Call(context.Background(), executor.MethodHeartbeat, nil, nil); !errors.Is(err, executor.ErrNotConnected) {
		t.Fatalf("Call before Run = %v, want executor.ErrNotConnected", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
