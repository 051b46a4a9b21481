package deployments

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// memStore is one deployment in memory, its runs unique per instant as
// the database makes them.
type memStore struct {
	mu   sync.Mutex
	d    store.Deployment
	runs []ma.DeploymentRun
}

func (m *memStore) UpdateDeployment(_ context.Context, _ string, fn func(*store.Deployment) error) (store.Deployment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.d
	if err := fn(&d); err != nil {
		return d, err
	}
	m.d = d
	return d, nil
}

func (m *memStore) ScheduledDeployments(context.Context) ([]store.Deployment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.d.Status != ma.DeploymentActive {
		return nil, nil
	}
	return []store.Deployment{m.d}, nil
}

func (m *memStore) CreateDeploymentRun(ctx context.Context, r ma.DeploymentRun, fn func(*store.Deployment) error) error {
	m.mu.Lock()
	for _, o := range m.runs {
		if *o.TriggerContext.ScheduledAt == *r.TriggerContext.ScheduledAt {
			m.mu.Unlock()
			return store.ErrConflict
		}
	}
	m.mu.Unlock()
	if _, err := m.UpdateDeployment(ctx, r.DeploymentID, fn); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs = append(m.runs, r)
	return nil
}

func (m *memStore) FinishDeploymentRun(_ context.Context, id string, sid *string, e *ma.DeploymentRunError) (ma.DeploymentRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.runs {
		if m.runs[i].ID == id {
			m.runs[i].SessionID, m.runs[i].Error = sid, e
			return m.runs[i], nil
		}
	}
	return ma.DeploymentRun{}, store.ErrNotFound
}

func (m *memStore) AbandonDeploymentRuns(context.Context, time.Time, ma.DeploymentRunError) ([]ma.DeploymentRun, error) {
	return nil, nil
}

func (m *memStore) scheduledAt() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.runs {
		out = append(out, *r.TriggerContext.ScheduledAt)
	}
	return out
}

type launcher struct{ err error }

func (l launcher) Launch(context.Context, store.Deployment, string) (string, error) {
	return "sesn_1", l.err
}

func newDeployment(expr string, since time.Time) store.Deployment {
	return store.Deployment{Deployment: ma.Deployment{ID: "depl_1", Status: ma.DeploymentActive,
		Schedule: &ma.Schedule{Type: "cron", Expression: expr, Timezone: "UTC"}}, Since: since}
}

// TestSchedulerFires: an hourly schedule fires at each hour, after its
// jitter, once per hour.
func TestSchedulerFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // synctest's epoch: 2000-01-01 00:00 UTC
		m := &memStore{d: newDeployment("0 * * * *", start)}
		s := NewScheduler(Config{Runs: &Runs{Store: m, Launcher: launcher{}}})
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*time.Hour + 10*time.Second)
		got := m.scheduledAt()
		want := []string{ma.Time(start.Add(time.Hour)), ma.Time(start.Add(2 * time.Hour)), ma.Time(start.Add(3 * time.Hour))}
		if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("fired %v, want %v", got, want)
		}
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSchedulerMissed: after downtime, only the latest missed instant is
// fired, and only within the grace.
func TestSchedulerMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		// Every minute since an hour ago: the latest instant (now) fires once.
		m := &memStore{d: newDeployment("* * * * *", now.Add(-time.Hour))}
		s := NewScheduler(Config{Runs: &Runs{Store: m, Launcher: launcher{}}})
		time.Sleep(DefaultJitter)
		s.Tick(t.Context())
		if got := m.scheduledAt(); len(got) != 1 || got[0] != ma.Time(now) {
			t.Fatalf("fired %v, want only %s", got, ma.Time(now))
		}
		// Daily at 22:00, set an hour before it, two hours ago: past the grace, skipped.
		m = &memStore{d: newDeployment("0 22 * * *", now.Add(-3*time.Hour))}
		s = NewScheduler(Config{Runs: &Runs{Store: m, Launcher: launcher{}}})
		s.Tick(t.Context())
		if got := m.scheduledAt(); len(got) != 0 {
			t.Fatalf("fired %v, want nothing past the grace", got)
		}
	})
}

// TestSchedulerPauses: a fire that fails with a pausing error pauses the
// deployment; a rate limit does not.
func TestSchedulerPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		for typ, pauses := range map[string]bool{"environment_archived_error": true, ErrRateLimited: false} {
			m := &memStore{d: newDeployment("* * * * *", now.Add(-time.Minute))}
			s := NewScheduler(Config{Runs: &Runs{Store: m, Launcher: launcher{Errorf(typ, "no")}}})
			s.Tick(t.Context())
			time.Sleep(DefaultJitter)
			s.Tick(t.Context())
			if (m.d.Status == ma.DeploymentPaused) != pauses || (pauses && m.d.PausedReason.Error.Type != typ) {
				t.Errorf("%s: status %s, paused_reason %+v", typ, m.d.Status, m.d.PausedReason)
			}
			if len(m.runs) != 1 || m.runs[0].Error == nil || m.runs[0].Error.Type != typ {
				t.Errorf("%s: runs %+v", typ, m.runs)
			}
		}
	})
}
