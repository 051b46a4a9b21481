package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/reinsdev/reins/bench/internal/benchclient"
	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/harness"
	ma "github.com/reinsdev/reins/managedagents"
)

// serverTurns measures, through a real server (the app on a SQLite file,
// over loopback HTTP), a turn of the built-in loop (the scripted model
// answering at once) and a turn on an agent end (turn.start →
// session.event with an agent.message and turn.end → idle), in
// alternating blocks of block turns on fresh sessions, so that both see
// the same machine and logs of the same length (a long block: turn.start
// carries its transcript as a delta, the agent end keeping the session's
// transcript). A turn is timed from the POST of the user.message to its
// idle on the session's stream.
func serverTurns(turns, block int) (builtin, agentEnd latency) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "reins-bench-turns-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := benchclient.Serve(ctx, app.Config{DataDir: dir})
	defer srv.Close()
	url := srv.URL
	c := srv.Client(&http.Transport{MaxIdleConnsPerHost: 64})
	var ag ma.Agent
	c.Do(url, "POST", "/v1/agents", map[string]any{"name": "bench", "model": "scripted"}, &ag)
	var cloud, hosted ma.Environment
	c.Do(url, "POST", "/v1/environments", map[string]any{"name": "cloud"}, &cloud)
	c.Do(url, "POST", "/v1/environments", map[string]any{"name": "brains", "config": map[string]any{"type": "self_hosted"}}, &hosted)
	var ek struct{ Key string }
	c.Do(url, "POST", "/v1/environments/"+hosted.ID+"/keys", nil, &ek)
	brain := executor.NewClient(executor.Options{URL: url, EnvironmentKey: ek.Key, Executor: executor.ExecutorInfo{Name: "bench-brain"},
		Sessions: noopSessions{}, Capabilities: []string{executor.CapabilityAgent},
		Agent: executor.AgentHandlerFunc(func(ctx context.Context, t *executor.Turn) error {
			return t.Send(ctx, benchAnswer, map[string]string{"type": executor.EventTurnEnd})
		})})
	go brain.Run(ctx)
	defer func() { brain.Stop(); <-brain.Done() }()

	// A pair of fresh sessions per block.
	pair := func() (b, a string, bst, ast *benchclient.Stream) {
		var bs, as ma.Session
		c.Do(url, "POST", "/v1/sessions", map[string]any{"agent": ag.ID, "environment_id": cloud.ID}, &bs)
		c.Do(url, "POST", "/v1/sessions", map[string]any{"agent": ag.ID, "environment_id": hosted.ID,
			"metadata": map[string]string{harness.AgentEndMetadataKey: "true"}}, &as)
		return bs.ID, as.ID, c.Open(url, bs.ID, ""), c.Open(url, as.ID, "")
	}
	turn := func(id string, s *benchclient.Stream) time.Duration {
		t0 := time.Now()
		c.Do(url, "POST", "/v1/sessions/"+id+"/events", benchclient.Message("hello"), nil)
		s.WaitFor(ma.EventStatusIdle)
		return time.Since(t0)
	}
	var bd, ad []time.Duration
	for warm := true; len(bd) < turns; warm = false {
		b, a, bst, ast := pair()
		var bb, ab []time.Duration
		n := block
		if warm {
			n = min(block, 25)
		}
		for range n {
			bb = append(bb, turn(b, bst))
		}
		for range n {
			ab = append(ab, turn(a, ast))
		}
		bst.Close()
		ast.Close()
		if !warm { // the first block waits for the agent end to connect
			bd, ad = append(bd, bb...), append(ad, ab...)
		}
	}
	return percentiles(bd), percentiles(ad)
}

// printServerTurns prints serverTurns's figures and their ratio.
func printServerTurns(turns, perSession int) {
	b, a := serverTurns(turns, max(perSession, 1))
	fmt.Printf("turns through a server (POST user.message → idle on the stream, SQLite, %d each, %d per session):\n", turns, perSession)
	fmt.Printf("%-34s %10s %10s\n", "built-in loop (scripted model)", b.p50, b.p99)
	fmt.Printf("%-34s %10s %10s\n", "agent end (start→event→idle)", a.p50, a.p99)
	fmt.Printf("%-34s %9.2fx %9.2fx\n\n", "ratio agent end/built-in loop", float64(a.p50)/float64(b.p50), float64(a.p99)/float64(b.p99))
}
