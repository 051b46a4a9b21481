package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// newDeployment is an active deployment of agent_a with a schedule.
func newDeployment(at time.Time) store.Deployment {
	return store.Deployment{Deployment: ma.Deployment{ID: ids.New(ids.Deployment), Type: "deployment", Name: "nightly",
		Agent: ma.AgentReference{Type: "agent", ID: "agent_a", Version: 1}, EnvironmentID: "env_a",
		InitialEvents: []ma.Raw{}, Resources: []ma.Raw{}, VaultIDs: []string{}, Metadata: ma.Metadata{},
		Schedule: &ma.Schedule{Type: "cron", Expression: "0 * * * *", Timezone: "UTC"}, Status: ma.DeploymentActive,
		Budget: ma.Raw("null"), CreatedAt: ma.Time(at), UpdatedAt: ma.Time(at)},
		Initial: []ma.Event{{Type: ma.EventUserMessage}}, Since: at.Truncate(time.Second)}
}

// testDeployments: a deployment is stored, read back with its initial
// events and since, updated, listed with the status and archive filters
// (in its workspace only) and listed among the scheduled ones while it
// is active, scheduled and not archived.
func testDeployments(t *testing.T, s store.Store) {
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	base := time.Now().Add(-time.Hour)
	a, b := newDeployment(base), newDeployment(base.Add(time.Minute))
	must(t, s.CreateDeployment(ctx, a))
	must(t, s.CreateDeployment(ctx, b))
	got, err := s.GetDeployment(ctx, a.ID)
	must(t, err)
	if got.Name != "nightly" || len(got.Initial) != 1 || !got.Since.Equal(a.Since) || got.WorkspaceID != store.DefaultWorkspace {
		t.Fatalf("GetDeployment = %+v", got)
	}
	other := store.WithWorkspace(context.Background(), "wrkspc_other")
	if _, err := s.GetDeployment(other, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetDeployment from another workspace: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateDeployment(ctx, b.ID, func(d *store.Deployment) error {
		d.Status = ma.DeploymentPaused
		d.PausedReason = &ma.PausedReason{Type: "manual"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	list := func(q store.DeploymentQuery) []string {
		t.Helper()
		items, err := s.ListDeployments(ctx, q)
		must(t, err)
		var out []string
		for _, it := range items {
			out = append(out, it.Value.ID)
		}
		return out
	}
	if got := list(store.DeploymentQuery{Status: ma.DeploymentPaused}); len(got) != 1 || got[0] != b.ID {
		t.Fatalf("paused = %v, want [%s]", got, b.ID)
	}
	sched, err := s.ScheduledDeployments(context.Background())
	must(t, err)
	if len(sched) != 1 || sched[0].ID != a.ID {
		t.Fatalf("ScheduledDeployments = %v, want only %s", sched, a.ID)
	}
	now := ma.Time(time.Now())
	if _, err := s.UpdateDeployment(ctx, a.ID, func(d *store.Deployment) error { d.ArchivedAt = &now; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := list(store.DeploymentQuery{}); len(got) != 1 || got[0] != b.ID {
		t.Fatalf("list = %v, want [%s]", got, b.ID)
	}
	if got := list(store.DeploymentQuery{ListQuery: store.ListQuery{IncludeArchived: true}}); len(got) != 2 {
		t.Fatalf("list with archived = %v, want 2", got)
	}
	if sched, _ := s.ScheduledDeployments(context.Background()); len(sched) != 0 {
		t.Fatalf("ScheduledDeployments after archive = %d, want 0", len(sched))
	}
}

// testDeploymentRuns: of concurrent scheduled runs of one instant one is
// recorded (the others get ErrConflict); manual runs are never refused;
// a run is finished with its session or error and listed with the
// deployment, trigger and error filters.
func testDeploymentRuns(t *testing.T, s store.Store) {
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	d := newDeployment(time.Now().Add(-time.Hour))
	must(t, s.CreateDeployment(ctx, d))
	at := ma.Time(time.Now().Truncate(time.Minute))
	run := func(trigger string) ma.DeploymentRun {
		r := ma.DeploymentRun{ID: ids.New(ids.DeploymentRun), Type: "deployment_run", DeploymentID: d.ID, Agent: d.Agent,
			TriggerContext: ma.TriggerContext{Type: trigger}, CreatedAt: ma.Time(time.Now())}
		if trigger == ma.TriggerSchedule {
			r.TriggerContext.ScheduledAt = &at
		}
		return r
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []string
	for range 5 {
		wg.Go(func() {
			r := run(ma.TriggerSchedule)
			err := s.CreateDeploymentRun(ctx, r, func(cur *store.Deployment) error {
				cur.Schedule.LastRunAt = &at
				return nil
			})
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, r.ID)
				mu.Unlock()
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("CreateDeploymentRun: %v", err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d scheduled runs recorded for one instant, want 1", len(won))
	}
	got, err := s.GetDeployment(ctx, d.ID)
	must(t, err)
	if got.Schedule.LastRunAt == nil || *got.Schedule.LastRunAt != at {
		t.Fatalf("last_run_at = %v, want %s", got.Schedule.LastRunAt, at)
	}
	m1, m2 := run(ma.TriggerManual), run(ma.TriggerManual)
	must(t, s.CreateDeploymentRun(ctx, m1, nil))
	must(t, s.CreateDeploymentRun(ctx, m2, nil))
	sess := "sesn_x"
	if _, err := s.FinishDeploymentRun(ctx, m1.ID, &sess, nil); err != nil {
		t.Fatal(err)
	}
	r2, err := s.FinishDeploymentRun(ctx, m2.ID, nil, &ma.DeploymentRunError{Type: "environment_archived_error", Message: "gone"})
	must(t, err)
	if r2.Error == nil || r2.SessionID != nil {
		t.Fatalf("finished run = %+v", r2)
	}
	count := func(q store.DeploymentRunQuery) int {
		t.Helper()
		items, err := s.ListDeploymentRuns(ctx, q)
		must(t, err)
		return len(items)
	}
	yes, no := true, false
	for _, c := range []struct {
		q    store.DeploymentRunQuery
		want int
	}{
		{store.DeploymentRunQuery{DeploymentID: d.ID}, 3},
		{store.DeploymentRunQuery{DeploymentID: "depl_unknown"}, 0},
		{store.DeploymentRunQuery{TriggerType: ma.TriggerManual}, 2},
		{store.DeploymentRunQuery{HasError: &yes}, 1},
		{store.DeploymentRunQuery{HasError: &no}, 2},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("ListDeploymentRuns(%+v) = %d runs, want %d", c.q, got, c.want)
		}
	}
	if _, err := s.GetDeploymentRun(store.WithWorkspace(context.Background(), "wrkspc_other"), m1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetDeploymentRun from another workspace: %v, want ErrNotFound", err)
	}
}

// testPendingDeploymentRuns: a run is pending until its outcome; a
// session finishes its run in its own transaction; AbandonDeploymentRuns
// records an error on the pending runs created before its instant (of
// every workspace), and a run with an outcome refuses another, in a
// session's transaction too, which then creates nothing.
func testPendingDeploymentRuns(t *testing.T, s store.Store) {
	bg := context.Background()
	ctx := store.WithWorkspace(bg, "wrkspc_b")
	d := newDeployment(time.Now())
	must(t, s.CreateDeployment(ctx, d))
	newRun := func(age time.Duration) ma.DeploymentRun {
		t.Helper()
		r := ma.DeploymentRun{ID: ids.New(ids.DeploymentRun), Type: "deployment_run", DeploymentID: d.ID, Agent: d.Agent,
			TriggerContext: ma.TriggerContext{Type: ma.TriggerManual}, CreatedAt: ma.Time(time.Now().Add(-age))}
		must(t, s.CreateDeploymentRun(ctx, r, nil))
		return r
	}
	session := func(runID string) (string, error) {
		sess := ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: "env_a",
			Agent: ma.SessionAgent{ID: "agent_a", Type: "agent", Version: 1}, Resources: []ma.Raw{}, VaultIDs: []string{},
			Metadata: ma.Metadata{}, DeploymentID: &d.ID, CreatedAt: ma.Time(time.Now()), UpdatedAt: ma.Time(time.Now())}
		_, err := s.CreateSession(ctx, sess, func(tx store.Tx) error { return tx.FinishDeploymentRun(runID) })
		return sess.ID, err
	}
	done, old, fresh := newRun(time.Hour), newRun(time.Hour), newRun(0)
	sid, err := session(done.ID)
	must(t, err)
	if got, _ := s.GetDeploymentRun(ctx, done.ID); got.SessionID == nil || *got.SessionID != sid || got.Error != nil {
		t.Fatalf("the run of a session: %+v", got)
	}
	runErr := ma.DeploymentRunError{Type: "unknown_error", Message: "stopped"}
	abandoned, err := s.AbandonDeploymentRuns(bg, time.Now().Add(-time.Minute), runErr)
	if err != nil || len(abandoned) != 1 || abandoned[0].ID != old.ID || abandoned[0].Error == nil || *abandoned[0].Error != runErr {
		t.Fatalf("abandoned %+v, %v; want only %s", abandoned, err, old.ID)
	}
	if got, _ := s.GetDeploymentRun(ctx, fresh.ID); got.Error != nil || got.SessionID != nil {
		t.Fatalf("a fresh run was abandoned: %+v", got)
	}
	if again, err := s.AbandonDeploymentRuns(bg, time.Now().Add(-time.Minute), runErr); err != nil || len(again) != 0 {
		t.Fatalf("abandoned again: %+v, %v", again, err)
	}
	if _, err := session(old.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a session of an abandoned run: %v, want ErrConflict", err)
	}
	if _, err := s.FinishDeploymentRun(ctx, done.ID, nil, &runErr); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("finishing a finished run: %v, want ErrConflict", err)
	}
	items, err := s.ListSessions(ctx, store.SessionQuery{DeploymentID: d.ID})
	if err != nil || len(items) != 1 {
		t.Fatalf("sessions of the deployment: %d, %v; want the one its run names", len(items), err)
	}
}
