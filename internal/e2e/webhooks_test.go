package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/scripted"
	"github.com/reinsdev/reins/internal/webhooks"
)

// hookDelivery is a delivery a receiver got, verified by the SDK.
type hookDelivery struct {
	webhookID string
	event     *anthropic.UnwrapWebhookEvent
}

// receiver is a webhook receiver on loopback: it refuses (503) while
// refuse says so, else verifies each delivery with the SDK's
// Beta.Webhooks.Unwrap under the signing secret and acknowledges it.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	refuse func(n int) bool // n counts the requests, from 1
	n      int
	got    []hookDelivery
	ids    []string // webhook-id of every request
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.n++
	rc.ids = append(rc.ids, r.Header.Get("webhook-id"))
	if rc.refuse != nil && rc.refuse(rc.n) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	svc := anthropic.NewBetaWebhookService(option.WithWebhookKey(rc.secret))
	ev, err := svc.Unwrap(body, r.Header)
	if err != nil {
		rc.t.Errorf("the SDK refused a delivery: %v (%s)", err, body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.got = append(rc.got, hookDelivery{r.Header.Get("webhook-id"), ev})
	w.WriteHeader(http.StatusNoContent)
}

// wait returns the deliveries once one of type typ for resource id has
// arrived.
func (rc *receiver) wait(typ, id string, within time.Duration) []hookDelivery {
	rc.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		rc.mu.Lock()
		got := slices.Clone(rc.got)
		rc.mu.Unlock()
		for _, d := range got {
			if d.event.Data.Type == typ && d.event.Data.ID == id {
				return got
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	rc.t.Fatalf("no %s of %s within %v; got %v", typ, id, within, rc.types())
	return nil
}

func (rc *receiver) types() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, d := range rc.got {
		out = append(out, d.event.Data.Type+" "+d.event.Data.ID)
	}
	return out
}

// fastWebhooks is a delivery config for tests: http allowed, short polls
// and backoff.
func fastWebhooks(c *app.Config) {
	c.Webhooks = webhooks.Config{AllowHTTP: true, Poll: 30 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Timeout: 2 * time.Second}
}

// newHook registers the receiver for events with the SDK and keeps its
// secret.
func newHook(t *testing.T, c anthropic.Client, rc *receiver, events ...string) *anthropic.BetaNewOrganizationWebhookEndpoint {
	t.Helper()
	ep, err := c.Beta.Organization.Webhooks.New(context.Background(), anthropic.BetaOrganizationWebhookNewParams{
		URL: rc.srv.URL + "/hook", EnabledEvents: events, Name: anthropic.String("test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ep.SigningSecret, "whsec_") || ep.State != "enabled" {
		t.Fatalf("endpoint %+v", ep)
	}
	rc.mu.Lock()
	rc.secret = ep.SigningSecret
	rc.mu.Unlock()
	return ep
}

// TestWebhooksSessionLife: an endpoint gets session.created,
// session.status_idled and session.deleted for a session's life, each
// verified by the SDK's own verifier.
func TestWebhooksSessionLife(t *testing.T) {
	s := startWith(t, options{models: model.Router{"scripted": &scripted.Provider{}}}, fastWebhooks)
	rc := newReceiver(t)
	newHook(t, s.client, rc, "session.created", "session.status_run_started", "session.status_idled", "session.deleted")
	agent := s.newAgent(t, "scripted")
	sid := s.newSession(t, agent.ID, s.newEnv(t, "cloud").ID).ID
	rc.wait("session.created", sid, 10*time.Second)
	s.send(t, sid, userMessage("hello"))
	rc.wait("session.status_idled", sid, 15*time.Second)
	if _, err := s.client.Beta.Sessions.Delete(context.Background(), sid, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	got := rc.wait("session.deleted", sid, 10*time.Second)
	var types []string
	for _, d := range got {
		if d.event.Data.ID != sid || d.event.Data.WorkspaceID == "" || d.webhookID != d.event.ID || !strings.HasPrefix(d.event.ID, "whe_") {
			t.Errorf("delivery %s: %s", d.webhookID, d.event.RawJSON())
		}
		types = append(types, d.event.Data.Type)
	}
	// Deliveries are unordered (a batch goes out concurrently).
	want := []string{"session.created", "session.deleted", "session.status_idled", "session.status_run_started"}
	slices.Sort(types)
	if !slices.Equal(types, want) {
		t.Errorf("types %v, want %v", types, want)
	}
}

// TestWebhookRetries: a receiver that fails twice gets the event on the
// third attempt, with the same webhook-id each time.
func TestWebhookRetries(t *testing.T) {
	s := startWith(t, options{}, fastWebhooks)
	rc := newReceiver(t)
	rc.refuse = func(n int) bool { return n <= 2 }
	newHook(t, s.client, rc, "environment.created")
	env := s.newEnv(t, "retried")
	got := rc.wait("environment.created", env.ID, 10*time.Second)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(got) != 1 || len(rc.ids) != 3 || rc.ids[0] != rc.ids[2] || rc.ids[1] != rc.ids[2] || got[0].webhookID != rc.ids[2] {
		t.Errorf("attempts' webhook-ids %v, deliveries %d", rc.ids, len(got))
	}
}

// TestWebhookLoopbackRefused: a receiver on loopback is refused unless
// the operator allowed it; its endpoint is disabled saying why.
func TestWebhookLoopbackRefused(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) {
		fastWebhooks(c)
		c.OutboundAllow = nil
	})
	rc := newReceiver(t)
	ep := newHook(t, s.client, rc, "environment.created")
	s.newEnv(t, "refused")
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.client.Beta.Organization.Webhooks.Get(context.Background(), ep.ID, anthropic.BetaOrganizationWebhookGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.State == "disabled" {
			if !strings.Contains(got.DisabledReason, "loopback") {
				t.Errorf("disabled_reason %q", got.DisabledReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the endpoint was not disabled")
		}
		time.Sleep(30 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.n != 0 {
		t.Errorf("the receiver got %d requests", rc.n)
	}
}

// TestWebhookCrashDeliversOnce: the server is killed after a change
// committed and before its event was delivered (the receiver refused
// it); restarted, it delivers the event exactly once.
func TestWebhookCrashDeliversOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	dir, addr, key := t.TempDir(), freeAddr(t), "sk-webhook-crash-key-000000000000"
	args := append(serveArgs(dir, addr), "--webhook-allow-http", "--outbound-allow", "127.0.0.1", "--webhook-poll", "30ms",
		"--webhook-backoff-min", "200ms", "--webhook-backoff-max", "200ms", "--webhook-attempts", "50", "--webhook-timeout", "1s")
	c := startChildCmd(t, exec.Command(bin, args...), addr, key)
	defer func() { c.kill() }()
	rc := newReceiver(t)
	var refusing sync.Mutex // held: refuse
	refusing.Lock()
	rc.refuse = func(int) bool {
		if refusing.TryLock() {
			refusing.Unlock()
			return false
		}
		return true
	}
	client := anthropic.NewClient(option.WithBaseURL(c.url), option.WithAPIKey(key), option.WithMaxRetries(0))
	newHook(t, client, rc, "environment.created")
	env, err := client.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rc.mu.Lock()
		n := rc.n
		rc.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no attempt before the kill")
		}
	}
	c.kill()
	refusing.Unlock()
	c = startChildCmd(t, exec.Command(bin, args...), addr, key)
	rc.wait("environment.created", env.ID, 20*time.Second)
	time.Sleep(time.Second) // any second delivery would come meanwhile
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.got) != 1 {
		t.Errorf("%d deliveries after the restart, want 1: %v", len(rc.got), rc.ids)
	}
}

// TestWebhookEndpointsAPI: with the SDK, a developer key manages its
// workspace's endpoints (every Managed Agents event type accepted,
// unknown ones a 400 naming them, https only without the operator's
// flag), a read_only key reads them, another workspace sees none.
func TestWebhookEndpointsAPI(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	var kits [2]*wsKit
	for i, name := range []string{"hooks-a", "hooks-b"} {
		w, err := s.client.Organization.Workspaces.New(ctx, anthropic.OrganizationWorkspaceNewParams{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		kits[i] = s.developer(t, w.ID, "dev-"+name, "developer")
	}
	hooks := kits[0].client.Beta.Organization.Webhooks
	_, err := hooks.New(ctx, anthropic.BetaOrganizationWebhookNewParams{URL: "https://example.com/h", EnabledEvents: []string{"session.created", "session.exploded"}})
	apiErr(t, err, 400, "invalid_request_error")
	if !strings.Contains(err.Error(), "session.exploded") {
		t.Errorf("the 400 does not name the type: %v", err)
	}
	_, err = hooks.New(ctx, anthropic.BetaOrganizationWebhookNewParams{URL: "http://example.com/h", EnabledEvents: []string{"session.created"}})
	apiErr(t, err, 400, "invalid_request_error")
	var made []string
	for _, events := range [][]string{{"session.created", "deployment_run.failed"}, {"agent.created"}, {"memory_store.deleted"}} {
		ep, err := hooks.New(ctx, anthropic.BetaOrganizationWebhookNewParams{URL: "https://example.com/h", EnabledEvents: events, Description: anthropic.String("d")})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, ep.ID)
	}
	page, err := hooks.List(ctx, anthropic.BetaOrganizationWebhookListParams{Limit: anthropic.Int(2)})
	if err != nil || len(page.Data) != 2 || !page.HasMore || page.Data[0].ID != made[2] || page.LastID != made[1] {
		t.Fatalf("list desc: %+v, %v", page, err)
	}
	page, err = hooks.List(ctx, anthropic.BetaOrganizationWebhookListParams{Order: "asc", AfterID: anthropic.String(made[0])})
	if err != nil || len(page.Data) != 2 || page.HasMore || page.Data[0].ID != made[1] {
		t.Fatalf("list asc after: %+v, %v", page, err)
	}
	up, err := hooks.Update(ctx, made[0], anthropic.BetaOrganizationWebhookUpdateParams{State: "disabled", Name: anthropic.String("renamed")})
	if err != nil || up.State != "disabled" || up.Name != "renamed" || len(up.EnabledEvents) != 2 || up.Description != "d" {
		t.Fatalf("update: %+v, %v", up, err)
	}
	up, err = hooks.Update(ctx, made[0], anthropic.BetaOrganizationWebhookUpdateParams{State: "enabled", EnabledEvents: []string{"vault.created"}})
	if err != nil || up.State != "enabled" || up.DisabledReason != "" || !slices.Equal(up.EnabledEvents, []string{"vault.created"}) {
		t.Fatalf("re-enable: %+v, %v", up, err)
	}
	sec, err := hooks.RegenerateSigningSecret(ctx, made[0], anthropic.BetaOrganizationWebhookRegenerateSigningSecretParams{})
	if err != nil || !strings.HasPrefix(sec.SigningSecret, "whsec_") {
		t.Fatalf("regenerate: %+v, %v", sec, err)
	}
	ro := s.developer(t, kits[0].ws, "ro-hooks", "read_only")
	if _, err := ro.client.Beta.Organization.Webhooks.Get(ctx, made[0], anthropic.BetaOrganizationWebhookGetParams{}); err != nil {
		t.Errorf("read_only get: %v", err)
	}
	_, err = ro.client.Beta.Organization.Webhooks.New(ctx, anthropic.BetaOrganizationWebhookNewParams{URL: "https://example.com/h", EnabledEvents: []string{"agent.created"}})
	apiErr(t, err, 403, "permission_error")
	_, err = kits[1].client.Beta.Organization.Webhooks.Get(ctx, made[0], anthropic.BetaOrganizationWebhookGetParams{})
	apiErr(t, err, 404, "not_found_error")
	del, err := hooks.Delete(ctx, made[0], anthropic.BetaOrganizationWebhookDeleteParams{})
	if err != nil || del.ID != made[0] || string(del.Type) != "webhook_endpoint_deleted" {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	_, err = hooks.Get(ctx, made[0], anthropic.BetaOrganizationWebhookGetParams{})
	apiErr(t, err, 404, "not_found_error")
}
