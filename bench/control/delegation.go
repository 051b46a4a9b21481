package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/scripted"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// The system prompts that tell the coordinator's model calls from the
// child's.
const (
	coordinatorSystem = "bench coordinator"
	childSystem       = "bench child"
)

// delegationTimer wraps the scripted model: it notes when the
// coordinator's model call that asks for spawn_agent returns, and sends
// the time from then to the start of the child's first model call.
type delegationTimer struct {
	inner   model.Provider
	mu      sync.Mutex
	spawned time.Time
	waits   chan time.Duration
}

// Stream implements model.Provider.
func (d *delegationTimer) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	if strings.Contains(req.System, childSystem) && len(req.Messages) == 1 {
		d.mu.Lock()
		wait := time.Since(d.spawned)
		d.mu.Unlock()
		d.waits <- wait
	}
	resp, err := d.inner.Stream(ctx, req, sink)
	if strings.Contains(req.System, coordinatorSystem) && len(req.Messages) == 1 {
		d.mu.Lock()
		d.spawned = time.Now()
		d.mu.Unlock()
	}
	return resp, err
}

// delegation measures, on a server of its own, the time from the
// coordinator's model answer asking for spawn_agent to the child's first
// model call, each sample in a fresh multi-agent session right after its
// raw-store baseline (the same 4 commits as the turn overhead's).
func delegation(dir string, raw *rawStore, n int, opts ...sqlite.Option) (server, baseline durations) {
	timer := &delegationTimer{inner: &scripted.Provider{}, waits: make(chan time.Duration, 1)}
	b := newBench(filepath.Join(dir, "delegation"), model.Router{"scripted": timer}, false, opts...)
	defer b.close()
	var child, coord ma.Agent
	b.do("POST", "/v1/agents", map[string]any{"name": "child", "model": "scripted", "system": childSystem}, &child)
	b.do("POST", "/v1/agents", map[string]any{"name": "coordinator", "model": "scripted", "system": coordinatorSystem,
		"multiagent": map[string]any{"type": "coordinator", "agents": []string{child.ID}}}, &coord)
	spawn, _ := json.Marshal(map[string]string{"agent": "child", "task": "@text done"})
	msg := map[string]any{"events": []map[string]any{{"type": "user.message",
		"content": []map[string]any{{"type": "text", "text": "@tool spawn_agent " + string(spawn) + "\n@then delegated"}}}}}
	for i := range n + 10 { // the first 10 warm up
		var s ma.Session
		b.do("POST", "/v1/sessions", map[string]any{"agent": coord.ID, "environment_id": b.env}, &s)
		st := b.open(s.ID)
		base := raw.turn()
		b.do("POST", "/v1/sessions/"+s.ID+"/events", msg, nil)
		wait := <-timer.waits
		st.WaitFor(ma.EventStatusIdle)
		st.Close()
		if i >= 10 {
			server, baseline = append(server, wait), append(baseline, base)
		}
	}
	return server, baseline
}
