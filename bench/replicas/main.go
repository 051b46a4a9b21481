// Command replicas benchmarks reins on one machine as one process on
// SQLite, one process on PostgreSQL and three replicas on one PostgreSQL
// database, in one run, with the zero-latency scripted model:
//
//   - turns per second and turn latency (a message sent to the end of its
//     turn, seen on a stream) with -clients sessions in text turns, each
//     session created on one replica, sent its messages on the next and
//     streamed from the third;
//   - the first tool call of a self-hosted session whose executor is
//     connected to the replica that runs it, against one that starts on
//     another replica (the session moves to its executor's replica): the
//     time from agent.tool_use to agent.tool_result.
//
// Usage: go run ./bench/replicas [-clients 16] [-duration 5s] [-tools 20]
// [-dsn postgres://…]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/reinsdev/reins/bench/internal/benchclient"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/scripted"
	"github.com/reinsdev/reins/internal/pgtest"
	ma "github.com/reinsdev/reins/managedagents"
)

type config struct {
	clients  int
	duration time.Duration
	tools    int
	dsn      string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.clients, "clients", 16, "sessions taking text turns at once")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long the clients take turns, per setup")
	flag.IntVar(&cfg.tools, "tools", 20, "first tool calls measured, local and moved each")
	flag.StringVar(&cfg.dsn, "dsn", pgtest.ServerDSN(), "PostgreSQL server (a database is created on it per setup and dropped)")
	flag.Parse()
	log.SetFlags(0)
	dir, err := os.MkdirTemp("", "reins-bench-replicas")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fmt.Printf("reins replicas benchmark: %d clients for %s per setup, scripted model\n\n", cfg.clients, cfg.duration)
	fmt.Printf("%-26s %9s %10s %10s\n", "setup", "turns/s", "p50", "p99")
	for _, s := range []struct {
		name     string
		replicas int
		pg       bool
	}{{"SQLite, 1 process", 1, false}, {"PostgreSQL, 1 replica", 1, true}, {"PostgreSQL, 3 replicas", 3, true}} {
		c, err := newCluster(filepath.Join(dir, fmt.Sprint(s.replicas, s.pg)), cfg.dsn, s.replicas, s.pg)
		if err != nil {
			log.Fatal(err)
		}
		rate, lat := c.throughput(cfg)
		fmt.Printf("%-26s %9.0f %10s %10s\n", s.name, rate, ms(quantile(lat, 50)), ms(quantile(lat, 99)))
		if s.replicas == 3 {
			local, moved := c.firstTools(cfg)
			fmt.Printf("\nfirst tool call of a self-hosted session (agent.tool_use to agent.tool_result), 3 replicas, %d each:\n", cfg.tools)
			fmt.Printf("  executor on the replica that runs the session  p50 %s  p99 %s\n", ms(quantile(local, 50)), ms(quantile(local, 99)))
			fmt.Printf("  session started on another replica (it moves)  p50 %s  p99 %s  (%+.1f ms p50)\n", ms(quantile(moved, 50)), ms(quantile(moved, 99)),
				float64(quantile(moved, 50)-quantile(local, 50))/float64(time.Millisecond))
		}
		c.close()
	}
}

// cluster is one setup: its replicas share a database (PostgreSQL), or
// there is one on SQLite.
type cluster struct {
	nodes  []*node
	drop   func() error
	agent  string
	env    string
	client *benchclient.Client
}

type node struct {
	app *app.App
	url string
}

func newCluster(dir, admin string, replicas int, pg bool) (*cluster, error) {
	ctx := context.Background()
	c := &cluster{client: &benchclient.Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}}
	dsn := ""
	if pg {
		var err error
		if dsn, c.drop, err = pgtest.NewDB(ctx, admin, "reins_bench_"); err != nil {
			return nil, err
		}
	}
	for i := range replicas {
		n, err := startNode(ctx, filepath.Join(dir, fmt.Sprint(i)), dsn, fmt.Sprintf("replica-%d", i))
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	key, _, err := httpapi.CreateKey(ctx, c.nodes[0].app.Store, "bench")
	if err != nil {
		return nil, err
	}
	c.client.Key = key
	var ag ma.Agent
	c.do(0, "POST", "/v1/agents", map[string]any{"name": "bench", "model": "scripted", "tools": []any{map[string]any{"type": ma.ToolTypeAgentToolset}}}, &ag)
	var env ma.Environment
	c.do(0, "POST", "/v1/environments", map[string]any{"name": "bench"}, &env)
	c.agent, c.env = ag.ID, env.ID
	return c, nil
}

// masterKey is the replicas' shared master key.
const masterKey = "bench-replicas-master-key-32-by!"

func startNode(ctx context.Context, dir, dsn, id string) (*node, error) {
	a, err := app.New(ctx, app.Config{DataDir: dir, DatabaseURL: dsn, ReplicaID: id, MasterKey: []byte(masterKey),
		Models: model.Router{"scripted": &scripted.Provider{}}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if err := a.Start(ctx, ln); err != nil {
		return nil, err
	}
	return &node{app: a, url: "http://" + ln.Addr().String()}, nil
}

func (c *cluster) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		n.app.Shutdown(ctx)
	}
	if c.drop != nil {
		if err := c.drop(); err != nil {
			log.Print(err)
		}
	}
}

// node returns the i-th node, round robin.
func (c *cluster) node(i int) *node { return c.nodes[i%len(c.nodes)] }

// do sends a request to node n (see benchclient.Client.Do).
func (c *cluster) do(n int, method, path string, body, out any) {
	c.client.Do(c.node(n).url, method, path, body, out)
}

func (c *cluster) newSession(n int, envID string) string {
	var s ma.Session
	c.do(n, "POST", "/v1/sessions", map[string]any{"agent": c.agent, "environment_id": envID}, &s)
	return s.ID
}

func (c *cluster) send(n int, sessionID, text string) {
	c.do(n, "POST", "/v1/sessions/"+sessionID+"/events", benchclient.Message(text), nil)
}

// throughput runs the clients for the duration and returns turns/s and
// the latencies.
func (c *cluster) throughput(cfg config) (float64, []time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(cfg.duration)
	for i := range cfg.clients {
		wg.Go(func() {
			id := c.newSession(i, c.env)
			st := c.open(i+2, id)
			defer st.Close()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				c.send(i+1, id, "hello")
				st.WaitFor(ma.EventStatusIdle)
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return float64(len(lat)) / time.Since(start).Seconds(), lat
}

// firstTools measures first tool calls in a self-hosted environment whose
// executor is connected to node 0: sessions created and sent on node 0,
// and sessions created and sent on node 1, interleaved.
func (c *cluster) firstTools(cfg config) (local, moved []time.Duration) {
	var env ma.Environment
	c.do(0, "POST", "/v1/environments", map[string]any{"name": "hands", "config": map[string]any{"type": ma.EnvSelfHosted}}, &env)
	var key struct{ Key string }
	c.do(0, "POST", "/v1/environments/"+env.ID+"/keys", nil, &key)
	ws, err := os.MkdirTemp("", "reins-bench-executor")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(ws)
	ex := executor.NewClient(executor.Options{URL: c.node(0).url, EnvironmentKey: key.Key, Executor: executor.ExecutorInfo{Name: "bench"},
		Workspace: ws, MaxSessions: 2 * cfg.tools})
	go ex.Run(context.Background())
	defer func() {
		ex.Stop()
		<-ex.Done()
	}()
	for range cfg.tools {
		local = append(local, c.firstTool(0, env.ID))
		moved = append(moved, c.firstTool(1, env.ID))
	}
	return local, moved
}

// firstTool runs one bash turn of a new session created, sent and
// streamed on node n, and returns its tool call's time by the events'
// processed_at.
func (c *cluster) firstTool(n int, envID string) time.Duration {
	id := c.newSession(n, envID)
	st := c.open(n, id)
	defer st.Close()
	c.send(n, id, `@tool bash {"command":"true"}`+"\n@then done")
	var use time.Time
	for {
		typ, data := st.Next()
		var ev struct {
			ProcessedAt string `json:"processed_at"`
		}
		json.Unmarshal(data, &ev)
		at, _ := time.Parse(time.RFC3339Nano, ev.ProcessedAt)
		switch typ {
		case ma.EventAgentToolUse:
			use = at
		case ma.EventAgentToolResult:
			return at.Sub(use)
		case ma.EventStatusIdle, "session.error":
			log.Fatalf("session %s: %s before a tool result", id, typ)
		}
	}
}

// open opens the session's event stream on node n.
func (c *cluster) open(n int, sessionID string) *benchclient.Stream {
	return c.client.Open(c.node(n).url, sessionID, "")
}

func quantile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
