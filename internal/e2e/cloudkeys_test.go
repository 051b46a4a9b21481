package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// cloudRefusal is the sentence every refusal of a cloud environment's
// keys, executors and work queue carries.
func cloudRefusal(envID string) string {
	return "environment " + envID + " is a cloud environment: its tools run on the server's own sandboxes, " +
		"which need no environment key, executor or work queue; create a self_hosted environment to run tools on your machines"
}

// request does one request with the headers auth sets and decodes the
// error envelope of a failure.
func request(t *testing.T, url, method, path string, body any, auth map[string]string) (int, ma.ErrorEnvelope) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range auth {
		req.Header.Set(k, v)
	}
	req.Header.Set("content-type", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env ma.ErrorEnvelope
	if resp.StatusCode != http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			t.Fatalf("%s %s: %d without an error envelope: %v", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, env
}

// plantCloudKey stores an environment key of a cloud environment directly,
// as a database made before such keys were refused may hold one.
func plantCloudKey(t *testing.T, st store.Store, envID string) string {
	t.Helper()
	key, hash := executorhub.NewEnvironmentKey()
	k := store.EnvironmentKey{ID: ids.New("ekey_"), EnvironmentID: envID, Hash: hash, Hint: key[len(key)-4:], CreatedAt: time.Now().UTC()}
	if err := st.CreateEnvironmentKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return key
}

func TestCloudEnvironmentHasNoKeys(t *testing.T) {
	s := start(t, options{})
	env := s.newEnv(t, "cloud")
	st, e := request(t, s.url, "POST", "/v1/environments/"+env.ID+"/keys", nil, map[string]string{"x-api-key": s.key})
	if st != http.StatusBadRequest || e.Type != "error" || e.Error.Type != ma.ErrInvalidRequest || e.Error.Message != cloudRefusal(env.ID) {
		t.Fatalf("minting a key of a cloud environment: %d %+v", st, e)
	}
	keys, err := s.app.Store.ListEnvironmentKeys(context.Background(), env.ID)
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys after the refusal: %v %v", keys, err)
	}
	// Self-hosted environments still get keys.
	if _, key := s.selfHosted(t, "hands"); !strings.HasPrefix(key, executorhub.EnvironmentKeyPrefix) {
		t.Fatalf("self-hosted key %q", key)
	}
}

func TestCloudEnvironmentKeyFromAnOldDatabaseIsRefused(t *testing.T) {
	s := start(t, options{})
	env := s.newEnv(t, "cloud")
	key := plantCloudKey(t, s.app.Store, env.ID)
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, env.ID)
	bearer := map[string]string{"Authorization": "Bearer " + key}

	// No executor token...
	st, e := request(t, s.url, "POST", "/v1/executor/tokens", nil, bearer)
	if st != http.StatusUnauthorized || e.Error.Type != ma.ErrAuthentication || !strings.Contains(e.Error.Message, cloudRefusal(env.ID)) {
		t.Fatalf("token endpoint with a cloud environment's key: %d %+v", st, e)
	}
	// ...so no connection: the client ends with the server's reason.
	c := executor.NewClient(executor.Options{URL: s.url, EnvironmentKey: key, Executor: executor.ExecutorInfo{Name: "intruder"},
		Workspace: t.TempDir(), BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, executor.ErrCredentialRejected) || !strings.Contains(err.Error(), "is a cloud environment") {
		t.Fatalf("executor with a cloud environment's key: %v", err)
	}
	// Nor the session (forged tool results) or the work queue, which the
	// pull workers use.
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/sessions/" + sess.ID + "/events"},
		{"GET", "/v1/sessions/" + sess.ID},
		{"GET", "/v1/environments/" + env.ID + "/work/poll"},
	} {
		body := map[string]any{"events": []map[string]any{{"type": "user.tool_result", "tool_use_id": "toolu_forged",
			"content": []map[string]any{{"type": "text", "text": "forged"}}}}}
		st, e := request(t, s.url, c.method, c.path, body, bearer)
		if st != http.StatusUnauthorized || e.Error.Type != ma.ErrAuthentication || !strings.Contains(e.Error.Message, cloudRefusal(env.ID)) {
			t.Fatalf("%s %s with a cloud environment's key: %d %+v", c.method, c.path, st, e)
		}
	}
	// The session's own executor still runs its tools.
	stream := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(toolScript))
	checkToolResults(t, stream.until(isIdle))
}

func TestCloudEnvironmentHasNoWorkQueue(t *testing.T) {
	s := start(t, options{})
	env := s.newEnv(t, "cloud")
	a := s.newAgent(t, "scripted")
	s.newSession(t, a.ID, env.ID)
	for _, path := range []string{"/work/poll", "/work/stats", "/work"} {
		st, e := request(t, s.url, "GET", "/v1/environments/"+env.ID+path, nil, map[string]string{"x-api-key": s.key})
		if st != http.StatusBadRequest || e.Error.Type != ma.ErrInvalidRequest || e.Error.Message != cloudRefusal(env.ID) {
			t.Fatalf("GET %s of a cloud environment: %d %+v", path, st, e)
		}
	}
}

// anyKey accepts any environment key as a key of env: the credentials of
// a hub that shares the server's token secret, to mint a token as one
// issued before cloud environments' keys were refused.
type anyKey struct{ env string }

func (k anyKey) VerifyEnvironmentKey(context.Context, string) (string, error) { return k.env, nil }
func (anyKey) VerifyMachineToken(context.Context, string) (string, error) {
	return "", executor.ErrCredentialRejected
}

// fixedToken is a TokenSource that always returns the same token.
type fixedToken struct{ tok executor.Token }

func (f fixedToken) Token(context.Context) (executor.Token, error) { return f.tok, nil }

func TestOutsideExecutorCannotRegisterInACloudEnvironment(t *testing.T) {
	secret := []byte("a token secret the server and the forger share")
	s := startWith(t, options{}, func(c *app.Config) { c.Hub.TokenSecret = secret })
	env := s.newEnv(t, "cloud")
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, env.ID)
	stream := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage(toolScript))
	checkToolResults(t, stream.until(isIdle)) // the local executor is registered

	// A valid token of the cloud environment, as one issued before.
	forger := executorhub.NewHub(executorhub.HubOptions{TokenSecret: secret, Credentials: anyKey{env.ID}})
	srv := httptest.NewServer(forger)
	defer srv.Close()
	tok, err := (&executor.TokenEndpoint{URL: srv.URL, Credential: executorhub.EnvironmentKeyPrefix + "forged"}).Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok.URL = "ws" + strings.TrimPrefix(s.url, "http") + "/v1/executor/connect"
	// The server checks the credential a token names again at connect: the
	// forged one is refused before any registration.
	req, _ := http.NewRequest("GET", s.url+"/v1/executor/connect", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("connect with a forged cloud environment token: %d, want 401", resp.StatusCode)
	}
	// Named "local", it would take the in-process executor's place.
	c := executor.NewClient(executor.Options{URL: s.url, TokenSource: fixedToken{tok}, Executor: executor.ExecutorInfo{Name: "local"},
		Workspace: t.TempDir(), MaxRefusedRegistrations: 1, MaxReconnectAttempts: 2, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, executor.ErrReconnectExhausted) {
		t.Fatalf("outside executor in a cloud environment: %v, want ErrReconnectExhausted", err)
	}
	for _, x := range s.app.Hub.Executors() {
		if x.EnvironmentID == env.ID && x.Executor.Version != "local" {
			t.Fatalf("an outside executor is registered: %+v", x)
		}
	}
	s.send(t, sess.ID, userMessage(toolScript))
	checkToolResults(t, stream.until(isIdle))
}

func TestEnvironmentTypeCannotChange(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	cloud := s.newEnv(t, "cloud")
	hosted, _ := s.selfHosted(t, "hands")
	for _, c := range []struct{ id, from, to string }{{cloud.ID, "cloud", "self_hosted"}, {hosted, "self_hosted", "cloud"}} {
		st, e := request(t, s.url, "POST", "/v1/environments/"+c.id, map[string]any{"config": map[string]any{"type": c.to}}, map[string]string{"x-api-key": s.key})
		if st != http.StatusBadRequest || e.Error.Type != ma.ErrInvalidRequest || !strings.Contains(e.Error.Message, "config.type: environment "+c.id+" is "+c.from+" and its type cannot change") {
			t.Fatalf("%s → %s: %d %+v", c.from, c.to, st, e)
		}
		got, err := s.client.Beta.Environments.Get(ctx, c.id, anthropic.BetaEnvironmentGetParams{})
		if err != nil || got.Config.Type != c.from {
			t.Fatalf("after the refused change: %+v %v", got, err)
		}
	}
	// A config of the same type still applies.
	st, e := request(t, s.url, "POST", "/v1/environments/"+cloud.ID,
		map[string]any{"config": map[string]any{"type": "cloud", "networking": map[string]any{"type": "limited", "allowed_hosts": []string{"example.com"}}}},
		map[string]string{"x-api-key": s.key})
	if st != http.StatusOK {
		t.Fatalf("same-type update: %d %+v", st, e)
	}
}
