// Command control benchmarks the control plane: turn overhead beside the
// raw store cost of the same commits, the SQLite commit latency with
// synchronous=FULL (the default) and NORMAL, turns per second with many
// concurrent sessions under each SQLite setting (FULL or NORMAL, with or
// without group commit), SSE fan-out to many subscribers of one session,
// the time from a delegation to the child's first model call, and the
// memory cost of idle sessions. It runs in-process servers on
// loopback with the zero-latency scripted model and prints every figure
// with its baseline.
//
//	go run ./bench/control
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/reinsdev/reins/bench/internal/benchclient"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/telemetry"
	ma "github.com/reinsdev/reins/managedagents"
)

func main() {
	turns := flag.Int("turns", 300, "turns for the overhead measurement")
	concurrent := flag.Int("concurrent", 200, "concurrent sessions for the throughput measurement")
	duration := flag.Duration("duration", 5*time.Second, "throughput measurement time, per round and store setting")
	rounds := flag.Int("rounds", 2, "interleaved throughput rounds per store setting; each setting reports its best")
	subscribers := flag.Int("subscribers", 1000, "SSE subscribers for the fan-out measurement")
	idle := flag.Int("idle", 10000, "idle sessions for the memory measurement")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the first throughput round with the default store setting to this file")
	overheadProfile := flag.String("overheadprofile", "", "write a CPU profile of the turn-overhead run to this file")
	withTelemetry := flag.Bool("telemetry", false, "run the servers with metrics and traces on (traces to a loopback collector that discards them), to measure their cost")
	synchronous := flag.String("synchronous", "FULL", "SQLite synchronous setting of the turn-overhead, first-token, fan-out and memory servers and of the raw store (the throughput and commit-latency figures measure FULL and NORMAL each)")
	flag.Parse()
	log.SetFlags(0)

	dir, err := os.MkdirTemp("", "reins-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	fmt.Printf("reins control-plane benchmark (GOMAXPROCS=%d, %s)\n\n", runtime.GOMAXPROCS(0), runtime.Version())
	syncOpt := sqlite.Synchronous(*synchronous)
	raw := openRawStore(filepath.Join(dir, "raw"), syncOpt)
	defer raw.st.Close()
	fake := newFakeMessages()
	b := newBench(dir, model.Router{"anthropic": fake.provider()}, *withTelemetry, syncOpt)
	defer func() { b.close() }()
	if *overheadProfile != "" {
		f, err := os.Create(*overheadProfile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
	}
	overhead, rawCost := b.turnOverhead(raw, *turns)
	if *overheadProfile != "" {
		pprof.StopCPUProfile()
	}
	fmt.Printf("turn overhead (POST user.message -> SSE session.status_idle, scripted model, synchronous=%s), %d turns:\n", strings.ToUpper(*synchronous), *turns)
	fmt.Printf("  reins   p50 %8s  p99 %8s\n", overhead.p(50), overhead.p(99))
	fmt.Printf("  raw store commit of the same events (4 transactions):\n")
	fmt.Printf("  store   p50 %8s  p99 %8s\n", rawCost.p(50), rawCost.p(99))
	fmt.Printf("  ratio   p50 %.2fx (goal <= 3x; each turn measured right after its baseline)\n\n", float64(overhead.p(50))/float64(rawCost.p(50)))

	ft := b.firstToken(fake, *turns/3)
	fmt.Printf("streamed turn, first token from the fake Messages API -> event_delta on the SSE stream, %d turns:\n", *turns/3)
	fmt.Printf("  p50 %s  p99 %s (goal p50 < 1ms; includes the provider's SSE decode and both loopback hops)\n\n", ft.p(50), ft.p(99))

	deleg, delegRaw := delegation(dir, raw, *turns/3, syncOpt)
	fmt.Printf("delegation, the coordinator's model answer asking for spawn_agent -> the child's first model call (scripted models, a fresh multi-agent session each), %d delegations:\n", *turns/3)
	fmt.Printf("  reins   p50 %8s  p99 %8s\n", deleg.p(50), deleg.p(99))
	fmt.Printf("  raw store commit (4 transactions, measured right before each)  p50 %8s  p99 %8s\n", delegRaw.p(50), delegRaw.p(99))
	fmt.Printf("  ratio   p50 %.2fx\n\n", float64(deleg.p(50))/float64(delegRaw.p(50)))

	commit := commitLatency(dir, *turns)
	fmt.Printf("SQLite commit latency, the raw store turn above (4 sequential transactions), %d turns interleaved:\n", *turns)
	for _, c := range commit {
		fmt.Printf("  synchronous=%-6s p50 %8s  p99 %8s  (%.2fx FULL's p50)\n", c.sync, c.lat.p(50), c.lat.p(99), float64(c.lat.p(50))/float64(commit[0].lat.p(50)))
	}
	fmt.Println()

	settings := throughputSettings(dir, *concurrent, *duration, *rounds, *cpuprofile, *withTelemetry)
	fmt.Printf("throughput with %d concurrent sessions, best of %d interleaved rounds of %s per SQLite setting:\n", *concurrent, *rounds, *duration)
	for _, st := range settings {
		fmt.Printf("  %-44s %5.0f turns/s  %.2fx  (turn latency p50 %s, p99 %s)\n", st.name, st.tps, st.tps/settings[0].tps, st.lat.p(50), st.lat.p(99))
	}
	fmt.Println()

	fan := b.fanout(*subscribers, 5)
	fmt.Printf("SSE fan-out, %d subscribers on one session, 5 turns (commit -> delivery of agent.message):\n", *subscribers)
	fmt.Printf("  p50 %s  p99 %s  max %s (goal p99 < 50ms)\n\n", fan.p(50), fan.p(99), fan.p(100))

	// A fresh server for the memory figure.
	b.close()
	b = newBench(filepath.Join(dir, "memory"), nil, *withTelemetry, syncOpt)
	before, after, rssBefore, rssAfter := b.idleMemory(*idle)
	fmt.Printf("memory with %d idle sessions (each after one finished turn):\n", *idle)
	fmt.Printf("  Go heap in use: %.1f MiB on a fresh server, %.1f MiB after (%+.0f bytes per idle session)\n", mib(before), mib(after), float64(int64(after)-int64(before))/float64(*idle))
	fmt.Printf("  process RSS:    %.1f MiB after (the whole benchmark process, SQLite page cache included; %.1f MiB before, with the earlier phases' garbage)\n", mib(rssAfter), mib(rssBefore))
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

type durations []time.Duration

func (d durations) p(q int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s) - 1) * q / 100
	return s[i].Round(time.Microsecond)
}

// rawStore is a store of its own on which rawTurn commits, directly, the
// events a scripted turn writes, in the same four transactions the runner
// uses: the baseline of the turn overhead.
type rawStore struct {
	st   *sqlite.Store
	sess string
	n    int
}

func openRawStore(dir string, opts ...sqlite.Option) *rawStore {
	ctx := context.Background()
	os.MkdirAll(dir, 0o700)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "raw.db"), opts...)
	if err != nil {
		log.Fatal(err)
	}
	now := ma.Time(time.Now())
	sess, err := st.CreateSession(ctx, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, CreatedAt: now, UpdatedAt: now,
		Agent:    ma.SessionAgent{ID: ids.New(ids.Agent), Type: "agent", Name: "bench", Model: ma.ModelConfig{ID: "scripted"}, Tools: []ma.Tool{}, MCPServers: []ma.MCPServer{}, Version: 1},
		Metadata: ma.Metadata{}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	return &rawStore{st: st, sess: sess.ID}
}

func (r *rawStore) turn() time.Duration {
	ctx := context.Background()
	st := r.st
	r.n++
	t0 := time.Now()
	msg := &ma.Event{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: fmt.Sprint("hello ", r.n)}}}
	must(st.UpdateSession(ctx, r.sess, func(tx store.Tx) error { return tx.Append(msg) }))
	must(st.UpdateSession(ctx, r.sess, func(tx store.Tx) error {
		ts := ma.Time(time.Now())
		msg.ProcessedAt = &ts
		tx.Session().Status = ma.StatusRunning
		return tx.Append(&ma.Event{Type: ma.EventStatusRunning, ProcessedAt: &ts}, msg)
	}))
	start := &ma.Event{Type: ma.EventSpanModelRequestStart}
	must(st.UpdateSession(ctx, r.sess, func(tx store.Tx) error { return tx.Append(start) }))
	must(st.UpdateSession(ctx, r.sess, func(tx store.Tx) error {
		ts := ma.Time(time.Now())
		f := false
		tx.Session().Status = ma.StatusIdle
		return tx.Append(&ma.Event{Type: ma.EventAgentMessage, ProcessedAt: &ts, Content: []ma.ContentBlock{{Type: "text", Text: "You said: hello"}}},
			&ma.Event{Type: ma.EventSpanModelRequestEnd, ModelRequestStartID: start.ID, IsError: &f, ProcessedAt: &ts, ModelUsage: &ma.ModelUsage{}},
			&ma.Event{Type: ma.EventStatusIdle, ProcessedAt: &ts, StopReason: &ma.StopReason{Type: ma.StopEndTurn}})
	}))
	return time.Since(t0)
}

func must(_ ma.Session, err error) {
	if err != nil {
		log.Fatal(err)
	}
}

type bench struct {
	srv    *benchclient.Server
	sink   *httptest.Server // the traces' collector, with -telemetry
	url    string
	client *benchclient.Client
	agent  string
	env    string
}

func newBench(dir string, models model.Router, withTelemetry bool, opts ...sqlite.Option) *bench {
	ctx := context.Background()
	cfg := app.Config{DataDir: filepath.Join(dir, "server"), IdleLinger: linger, Models: models, SQLite: opts}
	var sink *httptest.Server
	if withTelemetry {
		// A collector that takes the spans and discards them.
		sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
		cfg.Metrics, cfg.Tracing = telemetry.NewMetrics(), &telemetry.TracingConfig{Endpoint: sink.URL}
	}
	srv := benchclient.Serve(ctx, cfg)
	tr := &http.Transport{MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 0}
	b := &bench{srv: srv, sink: sink, url: srv.URL, client: srv.Client(tr)}
	var ag ma.Agent
	b.do("POST", "/v1/agents", map[string]any{"name": "bench", "model": "scripted"}, &ag)
	var env ma.Environment
	b.do("POST", "/v1/environments", map[string]any{"name": "bench"}, &env)
	b.agent, b.env = ag.ID, env.ID
	return b
}

func (b *bench) close() {
	b.srv.Close()
	if b.sink != nil {
		b.sink.Close()
	}
}

// do sends a request to the server (see benchclient.Client.Do).
func (b *bench) do(method, path string, body, out any) { b.client.Do(b.url, method, path, body, out) }

func (b *bench) newSession() string {
	var s ma.Session
	b.do("POST", "/v1/sessions", map[string]any{"agent": b.agent, "environment_id": b.env}, &s)
	return s.ID
}

var message = benchclient.Message("hello")

// open opens the session's event stream.
func (b *bench) open(sessionID string) *benchclient.Stream {
	return b.client.Open(b.url, sessionID, "")
}

func (b *bench) turn(sessionID string, s *benchclient.Stream) time.Duration {
	t0 := time.Now()
	b.do("POST", "/v1/sessions/"+sessionID+"/events", message, nil)
	s.WaitFor(ma.EventStatusIdle)
	return time.Since(t0)
}

// turnOverhead alternates a server turn and its raw-store baseline, so
// both see the same machine.
func (b *bench) turnOverhead(raw *rawStore, turns int) (server, baseline durations) {
	id := b.newSession()
	s := b.open(id)
	defer s.Close()
	for range 20 { // warm up
		b.turn(id, s)
		raw.turn()
	}
	for range turns {
		baseline = append(baseline, raw.turn())
		server = append(server, b.turn(id, s))
	}
	return server, baseline
}

func (b *bench) throughput(n int, d time.Duration) (float64, durations) {
	var total atomic.Int64
	var mu sync.Mutex
	var lat durations
	ids := make([]string, n)
	streams := make([]*benchclient.Stream, n)
	for i := range n {
		ids[i] = b.newSession()
		streams[i] = b.open(ids[i])
	}
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		id, s := ids[i], streams[i]
		wg.Go(func() {
			defer s.Close()
			var local durations
			for time.Now().Before(deadline) {
				local = append(local, b.turn(id, s))
				total.Add(1)
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds(), lat
}

// syncLatency is the raw store turn's latency with one synchronous setting.
type syncLatency struct {
	sync string
	lat  durations
}

// commitLatency alternates the raw store turn on a store with
// synchronous=FULL and one with NORMAL: what the sync at every commit costs
// a writer alone, where group commit has nothing to share.
func commitLatency(dir string, turns int) []syncLatency {
	out := []syncLatency{{sync: "FULL"}, {sync: "NORMAL"}}
	stores := make([]*rawStore, len(out))
	for i, c := range out {
		stores[i] = openRawStore(filepath.Join(dir, "raw-"+c.sync), sqlite.Synchronous(c.sync))
		defer stores[i].st.Close()
	}
	for range 20 { // warm up
		for _, st := range stores {
			st.turn()
		}
	}
	for range turns {
		for i, st := range stores {
			out[i].lat = append(out[i].lat, st.turn())
		}
	}
	return out
}

// setting is a SQLite configuration of the throughput measurement.
type setting struct {
	name string
	opts []sqlite.Option
	b    *bench
	tps  float64
	lat  durations
}

// throughputSettings measures the throughput of a server with the default
// store setting (synchronous=FULL with group commit) and of servers with
// synchronous=NORMAL and without group commit, in interleaved rounds.
func throughputSettings(dir string, concurrent int, d time.Duration, rounds int, cpuprofile string, withTelemetry bool) []*setting {
	settings := []*setting{
		{name: "synchronous=FULL,   group commit (default)"},
		{name: "synchronous=NORMAL, group commit", opts: []sqlite.Option{sqlite.Synchronous("NORMAL")}},
		{name: "synchronous=FULL,   one commit per write", opts: []sqlite.Option{sqlite.MaxBatch(1)}},
		{name: "synchronous=NORMAL, one commit per write", opts: []sqlite.Option{sqlite.Synchronous("NORMAL"), sqlite.MaxBatch(1)}},
	}
	for i, st := range settings {
		st.b = newBench(filepath.Join(dir, fmt.Sprint("throughput-", i)), nil, withTelemetry, st.opts...)
		defer st.b.close()
	}
	for r := range max(rounds, 1) {
		for i, st := range settings {
			profile := cpuprofile != "" && r == 0 && i == 0
			if profile {
				f, err := os.Create(cpuprofile)
				if err != nil {
					log.Fatal(err)
				}
				pprof.StartCPUProfile(f)
				runtime.SetBlockProfileRate(10000)
			}
			tps, lat := st.b.throughput(concurrent, d)
			if profile {
				pprof.StopCPUProfile()
				f, _ := os.Create(cpuprofile + ".block")
				pprof.Lookup("block").WriteTo(f, 0)
				f.Close()
				runtime.SetBlockProfileRate(0)
			}
			if tps > st.tps {
				st.tps, st.lat = tps, lat
			}
		}
	}
	return settings
}

func (b *bench) fanout(n, turns int) durations {
	id := b.newSession()
	subs := make([]*benchclient.Stream, n)
	for i := range subs {
		subs[i] = b.open(id)
	}
	time.Sleep(200 * time.Millisecond)
	var mu sync.Mutex
	var out durations
	for range turns {
		var wg sync.WaitGroup
		for _, s := range subs {
			wg.Go(func() {
				data := s.WaitFor(ma.EventAgentMessage)
				got := time.Now()
				var ev ma.Event
				json.Unmarshal(data, &ev)
				at, _ := time.Parse(time.RFC3339Nano, *ev.ProcessedAt)
				mu.Lock()
				out = append(out, got.Sub(at))
				mu.Unlock()
				s.WaitFor(ma.EventStatusIdle)
			})
		}
		b.do("POST", "/v1/sessions/"+id+"/events", message, nil)
		wg.Wait()
	}
	for _, s := range subs {
		s.Close()
	}
	return out
}

// linger is the runners' idle linger in this benchmark: short, so that the
// memory figure is taken after every runner left.
const linger = time.Second

func (b *bench) idleMemory(n int) (heapBefore, heapAfter, rssBefore, rssAfter uint64) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	b.client.HTTP.CloseIdleConnections()
	heapBefore, rssBefore = heap(), rss()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var s ma.Session
			body := map[string]any{"agent": b.agent, "environment_id": b.env, "initial_events": message["events"]}
			b.do("POST", "/v1/sessions", body, &s)
		})
	}
	wg.Wait()
	// Wait until every session finished its turn.
	for {
		ids, err := b.srv.App.Store.SessionIDsByStatus(context.Background(), ma.StatusRunning)
		pending, err2 := b.srv.App.Store.SessionIDsWithPending(context.Background())
		if err != nil || err2 != nil {
			log.Fatal(err, err2)
		}
		if len(ids) == 0 && len(pending) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.client.HTTP.CloseIdleConnections()
	time.Sleep(linger + 500*time.Millisecond)
	return heapBefore, heap(), rssBefore, rss()
}

func rss() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb uint64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}
