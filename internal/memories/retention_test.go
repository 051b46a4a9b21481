package memories

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// batches is a versionPruner with a backlog: each call deletes up to
// limit of what is left and records the bound it was given.
type batches struct {
	mu      sync.Mutex
	left    int64
	bounds  []time.Time
	batches int
}

func (b *batches) PruneMemoryVersions(_ context.Context, before time.Time, limit int) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bounds = append(b.bounds, before)
	n := min(b.left, int64(limit))
	b.left -= n
	b.batches++
	return n, nil
}

// TestPruner: the pruner prunes at start and every interval, with the
// retention as the bound, in batches until a batch comes back short, and
// stops with Stop.
func TestPruner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batches{left: 2500}
		p := &Pruner{Store: st, Retention: 48 * time.Hour, Interval: time.Hour}
		start := time.Now()
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		st.mu.Lock()
		if st.batches != 3 || st.left != 0 || !st.bounds[0].Equal(start.Add(-48*time.Hour)) {
			t.Errorf("at start: %d batches, %d left, bound %v", st.batches, st.left, st.bounds[0])
		}
		st.mu.Unlock()
		time.Sleep(time.Hour + time.Second)
		synctest.Wait()
		st.mu.Lock()
		if st.batches != 4 || !st.bounds[3].Equal(start.Add(time.Hour-48*time.Hour)) {
			t.Errorf("after an hour: %d batches, bound %v", st.batches, st.bounds[len(st.bounds)-1])
		}
		st.mu.Unlock()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
