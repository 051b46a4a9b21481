package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// newHook stores an enabled endpoint of ctx's workspace subscribed to
// events.
func newHook(t *testing.T, ctx context.Context, s store.Store, events ...string) store.WebhookEndpoint {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Microsecond)
	e := store.WebhookEndpoint{ID: ids.New("whep_"), URL: "https://example.com/hook", Name: "n", EnabledEvents: events,
		State: store.WebhookEnabled, SealedSecret: []byte("sealed"), CreatedAt: at, UpdatedAt: at}
	must(t, s.CreateWebhookEndpoint(ctx, e))
	e.WorkspaceID, _ = store.WorkspaceFrom(ctx)
	return e
}

// claimAll claims every due delivery with a long lease, as "type@endpoint"
// of each, sorted.
func claimAll(t *testing.T, s store.Store) ([]store.WebhookDelivery, []string) {
	t.Helper()
	ds, err := s.ClaimWebhookDeliveries(context.Background(), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.EventType+"@"+d.EndpointID)
	}
	slices.Sort(out)
	return ds, out
}

// testWebhookEndpoints: endpoints are stored in their workspace, read,
// updated, listed oldest first and deleted; other workspaces see none.
func testWebhookEndpoints(t *testing.T, s store.Store) {
	bg := context.Background()
	ctx, other := store.WithWorkspace(bg, store.DefaultWorkspace), store.WithWorkspace(bg, "wrkspc_b")
	a := newHook(t, ctx, s, "session.created")
	b := newHook(t, ctx, s, "agent.created", "session.deleted")
	got, err := s.GetWebhookEndpoint(ctx, a.ID)
	if err != nil || !got.CreatedAt.Equal(a.CreatedAt) || got.URL != a.URL || !slices.Equal(got.EnabledEvents, a.EnabledEvents) ||
		string(got.SealedSecret) != "sealed" || got.WorkspaceID != store.DefaultWorkspace || got.State != store.WebhookEnabled {
		t.Fatalf("GetWebhookEndpoint = %+v, %v", got, err)
	}
	if _, err := s.GetWebhookEndpoint(other, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another workspace reads the endpoint: %v", err)
	}
	up, err := s.UpdateWebhookEndpoint(ctx, a.ID, func(e *store.WebhookEndpoint) error {
		e.Name, e.EnabledEvents, e.SealedSecret = "renamed", []string{"session.updated"}, []byte("resealed")
		return nil
	})
	if err != nil || up.Name != "renamed" {
		t.Fatalf("UpdateWebhookEndpoint = %+v, %v", up, err)
	}
	if got, _ := s.GetWebhookEndpoint(ctx, a.ID); got.Name != "renamed" || string(got.SealedSecret) != "resealed" || !slices.Equal(got.EnabledEvents, []string{"session.updated"}) {
		t.Fatalf("after update: %+v", got)
	}
	list, err := s.ListWebhookEndpoints(ctx)
	if err != nil || len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID {
		t.Fatalf("ListWebhookEndpoints = %v, %v", list, err)
	}
	if list, _ := s.ListWebhookEndpoints(other); len(list) != 0 {
		t.Fatalf("another workspace lists %v", list)
	}
	if err := s.DeleteWebhookEndpoint(other, b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another workspace deletes: %v", err)
	}
	must(t, s.DeleteWebhookEndpoint(ctx, b.ID))
	if err := s.DeleteWebhookEndpoint(ctx, b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

// testWebhookOutbox: the store's changes queue their events in their
// own transaction, for the enabled endpoints of the workspace subscribed
// at that moment; a rolled-back change queues nothing; a claim counts an
// attempt and hides the delivery for its lease; settling acknowledges,
// retries or drops, and enough drops in a row disable the endpoint.
func testWebhookOutbox(t *testing.T, s store.Store) {
	bg := context.Background()
	ctx, other := store.WithWorkspace(bg, store.DefaultWorkspace), store.WithWorkspace(bg, "wrkspc_b")
	all := []string{"session.created", "session.status_idled", "session.archived", "session.deleted", "session.updated", "agent.created"}
	hook := newHook(t, ctx, s, all...)
	off := newHook(t, ctx, s, all...)
	must(t, errOnly(s.UpdateWebhookEndpoint(ctx, off.ID, func(e *store.WebhookEndpoint) error { e.State = store.WebhookDisabled; return nil })))
	elsewhere := newHook(t, other, s, all...)
	newHook(t, ctx, s, "environment.created") // not subscribed

	agent := newAgent("hooked")
	must(t, s.CreateAgent(ctx, agent))
	sess, err := NewSession(ctx, s, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: "env_x",
		Agent: ma.SessionAgent{ID: agent.ID, Version: 1}, CreatedAt: now(), UpdatedAt: now(), Metadata: ma.Metadata{}})
	must(t, err)
	boom := errors.New("rolled back")
	if _, err := Change(bg, s, sess.ID, func(tx store.Tx) error {
		tx.Session().Title = "never"
		if err := tx.Append(&ma.Event{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopEndTurn}}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled-back change: %v", err)
	}
	_, err = Change(bg, s, sess.ID, func(tx store.Tx) error {
		at := now()
		tx.Session().Title, tx.Session().ArchivedAt = "titled", &at
		return tx.Append(&ma.Event{Type: ma.EventStatusIdle, StopReason: &ma.StopReason{Type: ma.StopEndTurn}})
	})
	must(t, err)
	must(t, s.DeleteSession(ctx, sess.ID))
	ds, got := claimAll(t, s)
	want := []string{"agent.created@" + hook.ID, "session.archived@" + hook.ID, "session.created@" + hook.ID,
		"session.deleted@" + hook.ID, "session.status_idled@" + hook.ID, "session.updated@" + hook.ID}
	if !slices.Equal(got, want) {
		t.Fatalf("queued %v, want %v (endpoint %s of another workspace)", got, want, elsewhere.ID)
	}
	for _, d := range ds {
		var env struct {
			Type, ID string
			Data     map[string]string
		}
		if err := json.Unmarshal(d.Body, &env); err != nil || env.Type != "event" || env.ID != d.EventID || env.Data["type"] != d.EventType ||
			env.Data["workspace_id"] != store.DefaultWorkspace || d.Attempts != 1 || d.URL != hook.URL || string(d.SealedSecret) != "sealed" {
			t.Fatalf("delivery %+v: %s (%v)", d, d.Body, err)
		}
		if d.EventType != "agent.created" && env.Data["id"] != sess.ID {
			t.Fatalf("%s of %q", d.EventType, env.Data["id"])
		}
	}
	if _, again := claimAll(t, s); len(again) != 0 {
		t.Fatalf("claimed again during the lease: %v", again)
	}
	if n, err := s.CountWebhookDeliveries(bg); err != nil || n != 6 {
		t.Fatalf("CountWebhookDeliveries = %d, %v", n, err)
	}
	// Settle: one delivered, one retried at once, the rest dropped.
	must(t, s.SettleWebhookDelivery(bg, ds[0], store.WebhookOutcome{Delivered: true}))
	must(t, s.SettleWebhookDelivery(bg, ds[1], store.WebhookOutcome{RetryIn: time.Nanosecond}))
	time.Sleep(5 * time.Millisecond)
	retried, _ := claimAll(t, s)
	if len(retried) != 1 || retried[0].EventID != ds[1].EventID || retried[0].Attempts != 2 {
		t.Fatalf("retried %+v", retried)
	}
	for _, d := range append(ds[2:5], retried[0]) {
		must(t, s.SettleWebhookDelivery(bg, d, store.WebhookOutcome{DisableAfter: 5}))
	}
	if e, _ := s.GetWebhookEndpoint(ctx, hook.ID); e.State != store.WebhookEnabled {
		t.Fatalf("disabled after 4 drops: %+v", e)
	}
	must(t, s.SettleWebhookDelivery(bg, ds[5], store.WebhookOutcome{DisableAfter: 5}))
	e, _ := s.GetWebhookEndpoint(ctx, hook.ID)
	if e.State != store.WebhookDisabled || e.DisabledReason == "" {
		t.Fatalf("not disabled after 5 drops: %+v", e)
	}
	if n, _ := s.CountWebhookDeliveries(bg); n != 0 {
		t.Fatalf("%d deliveries left", n)
	}
	must(t, s.CreateAgent(ctx, newAgent("unheard")))
	if _, got := claimAll(t, s); len(got) != 0 {
		t.Fatalf("queued for a disabled endpoint: %v", got)
	}
	// A disabling outcome drops the endpoint's other deliveries.
	hook2 := newHook(t, ctx, s, "agent.created")
	must(t, s.CreateAgent(ctx, newAgent("x")))
	must(t, s.CreateAgent(ctx, newAgent("y")))
	two, _ := claimAll(t, s)
	if len(two) != 2 {
		t.Fatalf("claimed %d", len(two))
	}
	must(t, s.SettleWebhookDelivery(bg, two[0], store.WebhookOutcome{Disable: "redirected"}))
	if e, _ := s.GetWebhookEndpoint(ctx, hook2.ID); e.State != store.WebhookDisabled || e.DisabledReason != "redirected" {
		t.Fatalf("after a disabling outcome: %+v", e)
	}
	if n, _ := s.CountWebhookDeliveries(bg); n != 0 {
		t.Fatalf("%d deliveries left after disabling", n)
	}
}

// testWebhookClaims: processes claiming at once (replicas) each get a
// delivery at most once.
func testWebhookClaims(t *testing.T, s store.Store) {
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	newHook(t, ctx, s, "agent.created")
	const n = 40
	for range n {
		must(t, s.EnqueueWebhookEvent(ctx, store.WebhookEvent{Type: "agent.created", ResourceID: "agent_x", WorkspaceID: store.DefaultWorkspace}))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				ds, err := s.ClaimWebhookDeliveries(context.Background(), time.Minute, 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, d := range ds {
					seen[d.EventID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("claimed %d of %d deliveries", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("delivery %s claimed %d times", id, k)
		}
	}
}

func errOnly[T any](_ T, err error) error { return err }

// testDeploymentWebhooks: a deployment's create, update, pause, unpause
// and archive, and its scheduled run's start and end, queue their
// webhook events in their own transactions; a manual run and the
// scheduler's own bookkeeping (last_run_at) queue none.
func testDeploymentWebhooks(t *testing.T, s store.Store) {
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	hook := newHook(t, ctx, s, "deployment.created", "deployment.updated", "deployment.paused", "deployment.unpaused", "deployment.archived",
		"deployment_run.started", "deployment_run.succeeded", "deployment_run.failed")
	d := newDeployment(time.Now().Add(-time.Hour))
	must(t, s.CreateDeployment(ctx, d))
	update := func(fn func(*store.Deployment)) {
		t.Helper()
		must(t, errOnly(s.UpdateDeployment(ctx, d.ID, func(cur *store.Deployment) error { fn(cur); return nil })))
	}
	update(func(cur *store.Deployment) { cur.Name = "renamed" })
	update(func(cur *store.Deployment) { cur.Status = ma.DeploymentPaused })
	update(func(cur *store.Deployment) { cur.Status = ma.DeploymentActive })
	at := ma.Time(time.Now().Truncate(time.Minute))
	sessionID := "sesn_x"
	for _, trigger := range []string{ma.TriggerSchedule, ma.TriggerManual} {
		r := ma.DeploymentRun{ID: ids.New(ids.DeploymentRun), Type: "deployment_run", DeploymentID: d.ID, Agent: d.Agent,
			TriggerContext: ma.TriggerContext{Type: trigger}, CreatedAt: ma.Time(time.Now())}
		var fn func(*store.Deployment) error
		if trigger == ma.TriggerSchedule {
			r.TriggerContext.ScheduledAt = &at
			fn = func(cur *store.Deployment) error { cur.Schedule.LastRunAt = &at; return nil }
		}
		must(t, s.CreateDeploymentRun(ctx, r, fn))
		must(t, errOnly(s.FinishDeploymentRun(ctx, r.ID, &sessionID, nil)))
	}
	update(func(cur *store.Deployment) { at := ma.Time(time.Now()); cur.ArchivedAt = &at })
	_, got := claimAll(t, s)
	var want []string
	for _, typ := range []string{"deployment.archived", "deployment.created", "deployment.paused", "deployment.unpaused", "deployment.updated",
		"deployment_run.started", "deployment_run.succeeded"} {
		want = append(want, typ+"@"+hook.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("queued %v, want %v", got, want)
	}
}
