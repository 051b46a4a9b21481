package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reins.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "key_1", Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen (migrations must be idempotent): %v", err)
	}
	defer s.Close()
	if _, err := s.APIKeyByHash(ctx, "h"); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitIsolatesFailures: transactions committed together in one
// batch keep their own outcome; a failing one leaves no trace, and the
// others keep a gap-free log.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	t.Run("grouped", func(t *testing.T) { testCommitIsolatesFailures(t) })
	t.Run("one at a time", func(t *testing.T) { testCommitIsolatesFailures(t, sqlite.MaxBatch(1)) })
}

func testCommitIsolatesFailures(t *testing.T, opts ...sqlite.Option) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess, err := s.CreateSession(ctx, ma.Session{ID: "sesn_g", Status: ma.StatusIdle, Metadata: ma.Metadata{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
				if err := tx.Append(&ma.Event{Type: ma.EventAgentThinking}); err != nil {
					return err
				}
				if i%4 == 0 {
					return boom // written, then undone
				}
				return nil
			})
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case i%4 == 0 && !errors.Is(err, boom):
			t.Fatalf("%d: %v, want boom", i, err)
		case i%4 != 0 && err != nil:
			t.Fatalf("%d: %v", i, err)
		case err == nil:
			ok++
		}
	}
	log, err := s.ReadLog(ctx, sess.ID, 0, 1000)
	if err != nil || len(log) != ok {
		t.Fatalf("%d entries for %d successful transactions (%v)", len(log), ok, err)
	}
	for i, e := range log {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", e.Seq, i)
		}
	}
	// Writes after Close fail cleanly.
	s.Close()
	if _, err := s.UpdateSession(ctx, sess.ID, func(store.Tx) error { return nil }); !errors.Is(err, sqlite.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

// migratedDB creates a store at path and returns a plain connection to its
// database.
func migratedDB(t *testing.T, path string) *sql.DB {
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// insertWork inserts a work item of sesn_1 behind the store's back.
func insertWork(db *sql.DB, id, state string) error {
	body, _ := json.Marshal(store.WorkItem{ID: id, EnvironmentID: "env_1", SessionID: "sesn_1", State: state})
	_, err := db.Exec(`INSERT INTO work_items (id, environment_id, session_id, state, created_at, body) VALUES (?, 'env_1', 'sesn_1', ?, 0, ?)`, id, state, body)
	return err
}

// TestOpenWorkIndex: the schema itself refuses a second open work item for
// a session, whatever writes it.
func TestOpenWorkIndex(t *testing.T) {
	db := migratedDB(t, filepath.Join(t.TempDir(), "reins.db"))
	for _, w := range [][2]string{{"work_old", store.WorkStopped}, {"work_1", store.WorkQueued}} {
		if err := insertWork(db, w[0], w[1]); err != nil {
			t.Fatalf("insert %s: %v", w[0], err)
		}
	}
	if err := insertWork(db, "work_2", store.WorkActive); err == nil {
		t.Fatal("a second open work item of the session was inserted")
	}
}

// unaddColumns drop the columns later migrations add (ALTER TABLE … ADD
// COLUMN has no IF NOT EXISTS in SQLite), and first their indexes, for the
// tests that rewind the schema and replay them.
var unaddColumns = append([]string{unaddRunsPending[0], unaddRunsPending[1], unaddDeployments[0], unaddDeployments[1], `ALTER TABLE sessions DROP COLUMN stop_reason`, `ALTER TABLE vault_credentials DROP COLUMN version`, `ALTER TABLE vault_credentials DROP COLUMN refresh_until`},
	append(slices.Clone(unaddThreads), unaddWorkspaces...)...)

// unaddRunsPending drop the column migration 29 adds to deployment runs,
// and its index.
var unaddRunsPending = []string{`DROP INDEX deployment_runs_pending`, `ALTER TABLE deployment_runs DROP COLUMN pending`}

// unaddDeployments drop the column migration 28 adds to sessions, and
// its index.
var unaddDeployments = []string{`DROP INDEX sessions_deployment`, `ALTER TABLE sessions DROP COLUMN deployment_id`}

// unaddThreads drop the columns migration 23 adds to the log, and their
// index.
var unaddThreads = []string{`DROP INDEX events_thread`, `ALTER TABLE events DROP COLUMN thread_id`, `ALTER TABLE events DROP COLUMN on_session`}

// unaddWorkspaces drop the columns migration 22 adds, and their indexes.
var unaddWorkspaces = []string{`DROP INDEX agents_workspace`, `DROP INDEX sessions_workspace`, `DROP INDEX vaults_workspace`, `DROP INDEX files_workspace`, `DROP INDEX skills_workspace`, `DROP INDEX machines_workspace`,
	`ALTER TABLE agents DROP COLUMN workspace_id`, `ALTER TABLE sessions DROP COLUMN workspace_id`, `ALTER TABLE vaults DROP COLUMN workspace_id`,
	`ALTER TABLE files DROP COLUMN workspace_id`, `ALTER TABLE skills DROP COLUMN workspace_id`, `ALTER TABLE machines DROP COLUMN workspace_id`,
	`ALTER TABLE api_keys DROP COLUMN role`, `ALTER TABLE api_keys DROP COLUMN workspace_id`, `ALTER TABLE api_keys DROP COLUMN status`, `ALTER TABLE api_keys DROP COLUMN created_by_key_id`}

// rewind returns the statements that take a migrated database back to the
// schema before migration version, with the statements extra (run after
// unaddColumns) for what else the migrations from version changed.
func rewind(version int, extra ...string) []string {
	qs := append(slices.Clone(unaddColumns), extra...)
	return append(qs, fmt.Sprintf(`DELETE FROM schema_migrations WHERE version >= %d`, version))
}

// TestOpenWorkMigration: a database where a race opened two work items for
// one session migrates to the unique index, keeping the newest open.
func TestOpenWorkMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reins.db")
	db := migratedDB(t, path)
	// Back to the schema before the index, with the race's duplicates
	// (the later migrations run again too).
	for _, q := range rewind(7, `DROP INDEX work_open_session`, `DROP TABLE session_leases`, `DROP TABLE replica_hands`, `DROP TABLE session_workspaces`, `DROP TABLE machines`) {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"work_1", "work_2"} {
		if err := insertWork(db, id, store.WorkQueued); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckOneOpenWork(t, s, "env_1", "sesn_1", "work_2", "work_1")
}

func TestSynchronous(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts []sqlite.Option
		want int // PRAGMA synchronous: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
	}{
		{nil, 2},
		{[]sqlite.Option{sqlite.Synchronous("normal")}, 1},
		{[]sqlite.Option{sqlite.Synchronous("FULL")}, 2},
	} {
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sqlite.SynchronousLevel(s)
		s.Close()
		if err != nil || got != tc.want {
			t.Errorf("synchronous = %d (%v), want %d", got, err, tc.want)
		}
	}
	for _, opt := range []sqlite.Option{sqlite.Synchronous("sometimes"), sqlite.MaxBatch(0)} {
		if s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "reins.db"), opt); err == nil {
			s.Close()
			t.Error("Open accepted an invalid option")
		}
	}
}

// TestEventsRowidMigration: the events of a database whose events table is
// WITHOUT ROWID (before migration 9) are kept in the rowid table that
// replaces it, with its indexes.
func TestEventsRowidMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reins.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := ma.Time(time.Now())
	sess, err := s.CreateSession(ctx, ma.Session{ID: "sesn_1", Type: "session", Status: ma.StatusIdle, CreatedAt: now, UpdatedAt: now, Metadata: ma.Metadata{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := &ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: "hi"}}}
	if _, err := s.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
		return tx.Append(msg, &ma.Event{Type: ma.EventStatusRunning, ProcessedAt: &now})
	}); err != nil {
		t.Fatal(err)
	}
	want, _ := s.ReadLog(ctx, sess.ID, 0, 10)
	s.Close()

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Back to the table before migration 9.
	for _, q := range rewind(9,
		`CREATE TABLE events_old (session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, live INTEGER NOT NULL,
			pending INTEGER NOT NULL, processed_at INTEGER, body BLOB NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID`,
		`INSERT INTO events_old SELECT session_id, seq, id, type, live, pending, processed_at, body FROM events`,
		`DROP TABLE events`, `ALTER TABLE events_old RENAME TO events`,
		`CREATE INDEX events_by_id ON events (session_id, id)`, `CREATE INDEX events_pending ON events (session_id, seq) WHERE pending`,
		`DROP TABLE replica_hands`, `DROP TABLE session_workspaces`, `DROP TABLE machines`,
	) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if s, err = sqlite.Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'events'`).Scan(&ddl); err != nil || strings.Contains(ddl, "WITHOUT ROWID") {
		t.Fatalf("events table after the migration: %q, %v", ddl, err)
	}
	var indexes int
	db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('events_by_id', 'events_pending')`).Scan(&indexes)
	got, err := s.ReadLog(ctx, sess.ID, 0, 10)
	if err != nil || len(got) != 2 || indexes != 2 {
		t.Fatalf("after the migration: %d entries (%v), %d indexes", len(got), err, indexes)
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || string(got[i].Raw) != string(want[i].Raw) {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if pending, err := s.SessionIDsWithPending(ctx); err != nil || len(pending) != 1 {
		t.Fatalf("sessions with pending events after the migration: %v, %v", pending, err)
	}
}

// TestStopReasonMigration: sessions idle before the session stop reason
// existed (no column, no field in the body) take it from their log.
func TestStopReasonMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reins.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ss := storetest.SeedStopReasons(t, s)
	s.Close()
	db := migratedDB(t, path)
	for _, q := range rewind(18, `UPDATE sessions SET body = json_remove(CAST(body AS TEXT), '$.stop_reason')`) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if s, err = sqlite.Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckStopReasons(t, s, ss)
}

func TestErrorMapping(t *testing.T) {
	storetest.RunErrors(t, func(t *testing.T) (store.Store, storetest.Backdoor) {
		path := filepath.Join(t.TempDir(), "reins.db")
		s, err := sqlite.Open(context.Background(), path, sqlite.BusyTimeout(200))
		if err != nil {
			t.Fatal(err)
		}
		return s, backdoor(path)
	})
}

// backdoor is a storetest.Backdoor on a SQLite file.
type backdoor string

func (b backdoor) db(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", string(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Lock takes the file's write lock: SQLite locks the whole database.
func (b backdoor) Lock(t *testing.T, _ string) func() {
	ctx := context.Background()
	c, err := b.db(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := c.ExecContext(ctx, `ROLLBACK`); err != nil {
			t.Error(err)
		}
		c.Close()
	}
}

func (b backdoor) FailInserts(t *testing.T, table, msg string) {
	q := `CREATE TRIGGER fail_inserts BEFORE INSERT ON ` + table + ` BEGIN SELECT RAISE(ABORT, '` + strings.ReplaceAll(msg, "'", "''") + `'); END`
	if _, err := b.db(t).Exec(q); err != nil {
		t.Fatal(err)
	}
}
