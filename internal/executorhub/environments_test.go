package executorhub

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
)

// TestHubEnvironments lists the environments with outside executors (not
// the in-process ones) and signals their registrations and departures.
func TestHubEnvironments(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ids, changed := f.hub.Environments()
	if len(ids) != 0 {
		t.Fatalf("environments before any executor: %v", ids)
	}
	local := NewLocal(f.hub, LocalOptions{EnvironmentID: "env_cloud", Workspace: t.TempDir()})
	go local.Run(context.Background())
	defer func() { local.Stop(); <-local.Done() }()
	c := f.client(executor.Options{})
	await := func(want ...string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("environments %v, want %v", ids, want)
			}
			if ids, changed = f.hub.Environments(); slices.Equal(ids, want) {
				return
			}
		}
	}
	await("env_1")
	c.Stop()
	<-c.Done()
	await()
	for _, e := range f.hub.Executors() {
		if e.EnvironmentID != "env_cloud" {
			t.Fatalf("executors left: %+v", e)
		}
	}
}
