// Command scale measures, on a fresh PostgreSQL database of this
// machine, what the plan for 100,000 concurrent sessions on replicas
// (docs/scale.md) rests on:
//
//   - session lease renewals: one UPDATE per session against the batches
//     of store.Leases.RenewSessions (what replicas do), as rows renewed
//     per second, with -sessions lease rows spread over three owners;
//   - NOTIFY: notes per second delivered to two listening connections, in
//     batches of notes per statement as the relay sends them;
//   - the event log's growth: bytes on disk per event and per turn, for
//     turns of the shape the harness writes (a user message, status and
//     span events, an agent message), through the real store.
//
// Usage: go run ./bench/scale [-dsn postgres://…] [-sessions 100000]
// [-duration 5s] [-workers 8]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	ma "github.com/reinsdev/reins/managedagents"
)

type config struct {
	dsn      string
	sessions int
	duration time.Duration
	workers  int
	batch    int
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dsn, "dsn", pgtest.ServerDSN(), "PostgreSQL server (a database is created on it and dropped)")
	flag.IntVar(&cfg.sessions, "sessions", 100000, "lease rows")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each throughput phase runs")
	flag.IntVar(&cfg.workers, "workers", 8, "concurrent connections of the throughput phases")
	flag.IntVar(&cfg.batch, "batch", 1000, "sessions per batched renewal")
	flag.Parse()
	if err := run(context.Background(), cfg); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, cfg config) error {
	dsn, drop, err := pgtest.NewDB(ctx, cfg.dsn, "reins_scale_")
	if err != nil {
		return err
	}
	defer drop()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Printf("reins scale simulation: PostgreSQL at %s, %d sessions, %d workers, %s per phase\n\n", redact(cfg.dsn), cfg.sessions, cfg.workers, cfg.duration)
	if err := seedLeases(ctx, pool, cfg.sessions); err != nil {
		return err
	}
	single, err := renewEach(ctx, st, cfg)
	if err != nil {
		return err
	}
	batched, err := renewBatched(ctx, st, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("lease renewals, rows/s:  one UPDATE per session %9.0f   batches of %d %9.0f   (%.0fx)\n",
		single, cfg.batch, batched, batched/single)
	notes, err := notifyRate(ctx, pool, dsn, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("NOTIFY, notes/s delivered to each of 2 listeners (100 notes per statement): %.0f\n", notes)
	perEvent, perTurn, err := eventGrowth(ctx, st, pool)
	if err != nil {
		return err
	}
	fmt.Printf("event log on disk (table, indexes, TOAST): %.0f bytes per event, %.0f bytes per 6-event turn\n", perEvent, perTurn)
	return nil
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(dsn)"
}

// owners are the simulated replicas.
var owners = []string{"replica-a", "replica-b", "replica-c"}

// seedLeases writes n live lease rows, session i owned by owners[i%3]
// with token 1.
func seedLeases(ctx context.Context, pool *pgxpool.Pool, n int) error {
	_, err := pool.Exec(ctx, `INSERT INTO session_leases (session_id, owner, token, expires_at)
		SELECT 'sesn_' || i, (ARRAY['replica-a','replica-b','replica-c'])[1 + i % 3], 1, 0 FROM generate_series(0, $1 - 1) i`, n)
	return err
}

// phase runs fn on workers goroutines for d and returns the count they
// report per second.
func phase(ctx context.Context, workers int, d time.Duration, fn func(ctx context.Context, worker int, i int) (int, error)) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				n, err := fn(ctx, w, i)
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				total.Add(int64(n))
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(total.Load()) / time.Since(start).Seconds(), nil
}

// renewEach renews leases one statement per session through the store,
// as a replica's keepers did before the renewer batched them.
func renewEach(ctx context.Context, st store.Leases, cfg config) (float64, error) {
	return phase(ctx, cfg.workers, cfg.duration, func(ctx context.Context, w, i int) (int, error) {
		s := (i*cfg.workers + w) % cfg.sessions
		err := st.RenewSession(ctx, fmt.Sprintf("sesn_%d", s), owners[s%3], 1, 15*time.Second)
		if err != nil {
			return 0, err
		}
		return 1, nil
	})
}

// renewBatched renews leases cfg.batch at a time through the store's
// RenewSessions (one UPDATE per 500 leases, fenced row by row), as a
// replica's renewer does; each worker is a replica renewing its own
// sessions.
func renewBatched(ctx context.Context, st store.Leases, cfg config) (float64, error) {
	return phase(ctx, cfg.workers, cfg.duration, func(ctx context.Context, w, i int) (int, error) {
		owner := owners[w%3]
		fences := make([]store.Fence, 0, cfg.batch)
		for s := (i*cfg.batch*3 + w%3) % cfg.sessions; len(fences) < cfg.batch; s = (s + 3) % cfg.sessions {
			fences = append(fences, store.Fence{SessionID: fmt.Sprintf("sesn_%d", s), Token: 1})
		}
		fenced, err := st.RenewSessions(ctx, owner, fences, 15*time.Second)
		if err != nil {
			return 0, err
		}
		return len(fences) - len(fenced), nil
	})
}

// notifyRate sends notes in batches of 100 per statement from the
// workers and counts what each of two listeners receives.
func notifyRate(ctx context.Context, pool *pgxpool.Pool, dsn string, cfg config) (float64, error) {
	const channel = "reins_scale"
	var got [2]atomic.Int64
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := range got {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, err
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
			return 0, err
		}
		wg.Go(func() {
			for {
				if _, err := conn.WaitForNotification(lctx); err != nil {
					return
				}
				got[i].Add(1)
			}
		})
	}
	payload := make([]string, 100)
	for i := range payload {
		payload[i] = "w" + strings.Repeat("x", 40) + fmt.Sprint(i) // a session id and a kind, as the relay's notes
	}
	start := time.Now()
	_, err := phase(ctx, cfg.workers, cfg.duration, func(ctx context.Context, w, i int) (int, error) {
		_, err := pool.Exec(ctx, `SELECT pg_notify($1, p || $2::text) FROM unnest($3::text[]) p`, channel, fmt.Sprint(w, ".", i), payload)
		return len(payload), err
	})
	if err != nil {
		return 0, err
	}
	// Let the listeners drain what was sent.
	for prev := int64(-1); got[0].Load() != prev; {
		prev = got[0].Load()
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	stop()
	wg.Wait()
	return float64(min(got[0].Load(), got[1].Load())) / elapsed, nil
}

// eventGrowth writes turns of the shape the harness writes into 200
// sessions through the store and measures the events table's size.
func eventGrowth(ctx context.Context, st store.Store, pool *pgxpool.Pool) (perEvent, perTurn float64, err error) {
	const sessions, turns = 200, 10
	text := strings.Repeat("The answer is in the file you asked about. ", 10) // ~440 bytes
	var before int64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('events')`).Scan(&before); err != nil {
		return 0, 0, err
	}
	for range sessions {
		now := ma.Time(time.Now())
		sess, err := st.CreateSession(ctx, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
			EnvironmentID: "env_x", Agent: ma.SessionAgent{ID: "agent_x", Version: 1}, CreatedAt: now, UpdatedAt: now, Metadata: ma.Metadata{}}, nil)
		if err != nil {
			return 0, 0, err
		}
		for range turns {
			_, err := st.UpdateSession(ctx, sess.ID, func(tx store.Tx) error {
				now := ma.Time(time.Now())
				for _, ev := range []*ma.Event{
					{Type: ma.EventUserMessage, ProcessedAt: &now, Content: []ma.ContentBlock{{Type: "text", Text: "Please look at the report and summarize it."}}},
					{Type: ma.EventStatusRunning, ProcessedAt: &now},
					{Type: ma.EventSpanModelRequestStart, ProcessedAt: &now},
					{Type: ma.EventAgentMessage, ProcessedAt: &now, Content: []ma.ContentBlock{{Type: "text", Text: text}}},
					{Type: ma.EventSpanModelRequestEnd, ProcessedAt: &now},
					{Type: ma.EventStatusIdle, ProcessedAt: &now},
				} {
					if err := tx.Append(ev); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return 0, 0, err
			}
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE events`); err != nil {
		return 0, 0, err
	}
	var after, events int64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('events'), (SELECT count(*) FROM events)`).Scan(&after, &events); err != nil {
		return 0, 0, err
	}
	perEvent = float64(after-before) / float64(events)
	return perEvent, perEvent * 6, nil
}
