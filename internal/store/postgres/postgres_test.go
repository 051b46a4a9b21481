package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// freshDB is pgtest.FreshDB.
func freshDB(t *testing.T) string { return pgtest.FreshDB(t) }

func open(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, freshDB(t))
	})
}

func TestErrorMapping(t *testing.T) {
	storetest.RunErrors(t, func(t *testing.T) (store.Store, storetest.Backdoor) {
		dsn := freshDB(t)
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		// pgx sends the parameters it does not know to the server.
		return open(t, dsn+sep+"lock_timeout=200"), backdoor(dsn)
	})
}

// backdoor is a storetest.Backdoor on a PostgreSQL database.
type backdoor string

func (b backdoor) conn(t *testing.T) *pgx.Conn {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, string(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

// Lock locks table against every write, reads allowed.
func (b backdoor) Lock(t *testing.T, table string) func() {
	ctx := context.Background()
	tx, err := b.conn(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Error(err)
		}
	}
}

func (b backdoor) FailInserts(t *testing.T, table, msg string) {
	q := `CREATE FUNCTION fail_inserts() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '%', '` + strings.ReplaceAll(msg, "'", "''") + `'; END $$;
		CREATE TRIGGER fail_inserts BEFORE INSERT ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION fail_inserts()`
	if _, err := b.conn(t).Exec(context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	ctx := context.Background()
	dsn := freshDB(t)
	s := open(t, dsn)
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "key_1", Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("reopen (migrations must be idempotent): %v", err)
	}
	defer s.Close()
	if _, err := s.APIKeyByHash(ctx, "h"); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentMigrations opens replicas on one empty database at once:
// each migration must be applied exactly once.
func TestConcurrentMigrations(t *testing.T) {
	dsn := freshDB(t)
	const replicas = 4
	stores := make([]*postgres.Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			stores[i], errs[i] = postgres.Open(context.Background(), dsn)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
			continue
		}
		stores[i].Close()
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n, distinct int
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n == 0 || n != distinct {
		t.Fatalf("schema_migrations has %d rows for %d versions", n, distinct)
	}
}

// TestReplicasAppendGapFree has two stores (two pools, like two replicas)
// append to one session at once: the log must hold every event, with seqs
// 1..n and no gap or duplicate.
func TestReplicasAppendGapFree(t *testing.T) {
	ctx := context.Background()
	dsn := freshDB(t)
	a, b := open(t, dsn), open(t, dsn)
	defer a.Close()
	defer b.Close()
	sess := ma.Session{ID: "sesn_replicas", Status: "idle", CreatedAt: ma.Time(time.Now())}
	if _, err := a.CreateSession(ctx, sess, nil); err != nil {
		t.Fatal(err)
	}
	const workers, appends = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*appends)
	for _, s := range []*postgres.Store{a, b} {
		for w := range workers {
			wg.Go(func() {
				for i := range appends {
					_, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
						return tx.Append(&ma.Event{Type: "agent.message"}, &ma.Event{Type: "agent.thinking"})
					})
					if err != nil {
						errs <- fmt.Errorf("worker %d append %d: %w", w, i, err)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	const want = 2 * workers * appends * 2
	log, err := b.ReadLogRaw(ctx, sess.ID, 0, want+10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != want {
		t.Fatalf("log has %d entries, want %d", len(log), want)
	}
	for i, e := range log {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
	for _, s := range []*postgres.Store{a, b} {
		if last, err := s.LastSeq(ctx, sess.ID); err != nil || last != want {
			t.Fatalf("LastSeq = %d, %v; want %d", last, err, want)
		}
	}
}

// TestRawIsByteIdentical checks that an event's stored JSON comes back with
// the exact bytes written (jsonb would reorder keys).
func TestRawIsByteIdentical(t *testing.T) {
	ctx := context.Background()
	s := open(t, freshDB(t))
	defer s.Close()
	sess := ma.Session{ID: "sesn_raw", Status: "idle", CreatedAt: ma.Time(time.Now())}
	ev := &ma.Event{Type: "user.message", Content: []ma.ContentBlock{{Type: "text", Text: "zebra  \u00e9\n"}}}
	if _, err := s.CreateSession(ctx, sess, func(tx store.Tx) error { return tx.Append(ev) }); err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	log, err := s.ReadLogRaw(ctx, sess.ID, 0, 10, 0)
	if err != nil || len(log) != 1 {
		t.Fatalf("ReadLogRaw = %v, %v", log, err)
	}
	if string(log[0].Raw) != string(want) {
		t.Fatalf("Raw = %s, want %s", log[0].Raw, want)
	}
}

// migratedConn creates a store in a fresh database and returns its DSN and
// a plain connection to it.
func migratedConn(t *testing.T) (string, *pgx.Conn) {
	dsn := freshDB(t)
	open(t, dsn).Close()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return dsn, conn
}

// insertWork inserts a work item of sesn_1 behind the store's back.
func insertWork(conn *pgx.Conn, id, state string) error {
	body, _ := json.Marshal(store.WorkItem{ID: id, EnvironmentID: "env_1", SessionID: "sesn_1", State: state})
	_, err := conn.Exec(context.Background(), `INSERT INTO work_items (id, environment_id, session_id, state, created_at, body) VALUES ($1, 'env_1', 'sesn_1', $2, 0, $3)`, id, state, body)
	return err
}

// TestOpenWorkIndex: the schema itself refuses a second open work item for
// a session, whatever writes it.
func TestOpenWorkIndex(t *testing.T) {
	_, conn := migratedConn(t)
	for _, w := range [][2]string{{"work_old", store.WorkStopped}, {"work_1", store.WorkQueued}} {
		if err := insertWork(conn, w[0], w[1]); err != nil {
			t.Fatalf("insert %s: %v", w[0], err)
		}
	}
	if err := insertWork(conn, "work_2", store.WorkActive); err == nil {
		t.Fatal("a second open work item of the session was inserted")
	}
}

// TestOpenWorkMigration: a database where a race opened two work items for
// one session migrates to the unique index, keeping the newest open.
func TestOpenWorkMigration(t *testing.T) {
	dsn, conn := migratedConn(t)
	// Back to the schema before the index, with the race's duplicates.
	for _, q := range []string{`DROP INDEX work_open_session`, `DELETE FROM schema_migrations WHERE version = 6`} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"work_1", "work_2"} {
		if err := insertWork(conn, id, store.WorkQueued); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn)
	defer s.Close()
	storetest.CheckOneOpenWork(t, s, "env_1", "sesn_1", "work_2", "work_1")
}

// TestStopReasonMigration: sessions idle before the session stop reason
// existed (no column, no field in the body) take it from their log.
func TestStopReasonMigration(t *testing.T) {
	dsn, conn := migratedConn(t)
	s := open(t, dsn)
	ss := storetest.SeedStopReasons(t, s)
	s.Close()
	for _, q := range []string{`UPDATE sessions SET body = convert_to((convert_from(body, 'UTF8')::jsonb - 'stop_reason')::text, 'UTF8')`,
		`ALTER TABLE sessions DROP COLUMN stop_reason`, `DELETE FROM schema_migrations WHERE version = 16`} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s = open(t, dsn)
	defer s.Close()
	storetest.CheckStopReasons(t, s, ss)
}

// TestLostConnectionsAreUnavailable ends the store's connections
// (pg_terminate_backend): the statement that finds its connection gone
// fails with store.ErrUnavailable (not ErrFull), and the next one, on a
// new connection, succeeds.
func TestLostConnectionsAreUnavailable(t *testing.T) {
	dsn := freshDB(t)
	s := open(t, dsn)
	defer s.Close()
	ctx := context.Background()
	failed := 0
	for range 5 {
		if err := s.CheckWrite(ctx); err != nil {
			t.Fatalf("a write on live connections: %v", err)
		}
		if _, err := pgtest.TerminateBackends(ctx, dsn, false); err != nil {
			t.Fatal(err)
		}
		err := s.CheckWrite(ctx)
		if err == nil {
			continue // the pool noticed first, and connected again
		}
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrFull) {
			t.Fatalf("a write on a terminated connection: %v, want store.ErrUnavailable", err)
		}
		failed++
	}
	if failed == 0 {
		t.Fatal("no write found its connection terminated")
	}
}
