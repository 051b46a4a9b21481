package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// writerStore opens a store for the writer's tests and returns it with
// its file's path.
func writerStore(t *testing.T, opts ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reins.db")
	s, err := sqlite.Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// setting is a write transaction inserting the setting name.
func setting(name string) func(sqlstore.Querier) error {
	return func(tx sqlstore.Querier) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO settings (name, value) VALUES (?, 'x')`, name)
		return err
	}
}

// hasSetting reports whether the setting name was committed.
func hasSetting(t *testing.T, path, name string) bool {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM settings WHERE name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// occupy keeps the writer busy with a transaction until the returned
// function is called; that function waits for the transaction's end.
func occupy(t *testing.T, s *sqlite.Store) (release func()) {
	t.Helper()
	started, hold, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		ended <- sqlite.WithTx(context.Background(), s, func(sqlstore.Querier) error {
			close(started)
			<-hold
			return nil
		})
	}()
	<-started
	return func() {
		close(hold)
		if err := <-ended; err != nil {
			t.Errorf("the transaction that kept the writer busy: %v", err)
		}
	}
}

// waitQueued waits until n transactions wait in the writer's queue.
func waitQueued(t *testing.T, s *sqlite.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); sqlite.Queued(s) != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions queued, want %d", sqlite.Queued(s), n)
		}
	}
}

// async runs a write transaction in the background; its outcome arrives
// on the channel returned.
func async(ctx context.Context, s *sqlite.Store, fn func(sqlstore.Querier) error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- sqlite.WithTx(ctx, s, fn) }()
	return c
}

// TestWriteCancelledWhileWaiting: a caller whose context ends while its
// transaction waits for the busy writer (queued, or unable to queue
// because the queue is full) gets the context's error at once, and its
// transaction never runs.
func TestWriteCancelledWhileWaiting(t *testing.T) {
	s, path := writerStore(t, sqlite.QueueLen(1))
	release := occupy(t, s)
	queuedCtx, cancelQueued := context.WithCancel(context.Background())
	queued := async(queuedCtx, s, setting("queued"))
	waitQueued(t, s, 1)
	blockedCtx, cancelBlocked := context.WithCancel(context.Background())
	blocked := async(blockedCtx, s, setting("blocked"))
	for _, w := range []struct {
		name   string
		cancel func()
		done   <-chan error
	}{{"blocked on a full queue", cancelBlocked, blocked}, {"queued", cancelQueued, queued}} {
		w.cancel()
		select {
		case err := <-w.done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want context.Canceled", w.name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: still waiting for the busy writer after its context ended", w.name)
		}
	}
	release()
	// The writer is free again, and skipped what was given up.
	if err := sqlite.WithTx(context.Background(), s, setting("after")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"queued": false, "blocked": false, "after": true} {
		if got := hasSetting(t, path, name); got != want {
			t.Errorf("setting %s committed: %v, want %v", name, got, want)
		}
	}
}

// TestWriteCancelledWhileRunning: a transaction whose context ends while
// it runs is undone and fails with the context's error, even when its own
// statements all succeeded; a statement already running is not
// interrupted, which would roll back the transactions committed with it.
func TestWriteCancelledWhileRunning(t *testing.T) {
	s, path := writerStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := sqlite.WithTx(ctx, s, func(tx sqlstore.Querier) error {
		err := setting("ran")(tx)
		cancel()
		return err
	})
	if !errors.Is(err, context.Canceled) || hasSetting(t, path, "ran") {
		t.Fatalf("cancelled after its statements: %v, committed %v; want context.Canceled and undone", err, hasSetting(t, path, "ran"))
	}

	// A batch of two: the second one's context ends during a long insert.
	release := occupy(t, s)
	first := async(context.Background(), s, setting("first"))
	waitQueued(t, s, 1)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	second := async(ctx, s, func(tx sqlstore.Querier) error {
		time.AfterFunc(5*time.Millisecond, cancel)
		_, err := tx.Exec(ctx, `INSERT INTO settings (name, value) SELECT 'second', count(*) FROM
			(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) SELECT x FROM c)`)
		return err
	})
	waitQueued(t, s, 2)
	release()
	if err := <-first; err != nil || !hasSetting(t, path, "first") {
		t.Errorf("the transaction committed with a cancelled one: %v, committed %v", err, hasSetting(t, path, "first"))
	}
	if err := <-second; !errors.Is(err, context.Canceled) || hasSetting(t, path, "second") {
		t.Errorf("the cancelled transaction: %v, committed %v; want context.Canceled and undone", err, hasSetting(t, path, "second"))
	}
}

// TestWriteOutcomesWhenTheBatchBreaks: when a transaction leaves the batch
// in a state its savepoint statements fail on (here it ends the batch's
// transaction itself, as SQLite does after some failures), every caller
// of the batch is told its transaction failed, and none was committed.
func TestWriteOutcomesWhenTheBatchBreaks(t *testing.T) {
	s, path := writerStore(t)
	release := occupy(t, s)
	before := async(context.Background(), s, setting("before"))
	waitQueued(t, s, 1)
	breaker := async(context.Background(), s, func(q sqlstore.Querier) error {
		_, err := sqlite.TxOf(q).Exec(`ROLLBACK`)
		return err
	})
	waitQueued(t, s, 2)
	after := async(context.Background(), s, setting("after"))
	waitQueued(t, s, 3)
	release()
	for name, done := range map[string]<-chan error{"before": before, "breaker": breaker, "after": after} {
		err := <-done
		if committed := name != "breaker" && hasSetting(t, path, name); (err == nil) != committed {
			t.Errorf("%s: %v, but committed: %v", name, err, committed)
		}
	}
	if err := sqlite.WithTx(context.Background(), s, setting("next")); err != nil || !hasSetting(t, path, "next") {
		t.Fatalf("a write after the broken batch: %v", err)
	}
}
