// Command memory benchmarks memory stores in cloud sessions' sandboxes,
// on an in-process server with the scripted model and real sandboxes:
//
//   - write → visible: one session writes a file under /mnt/memory with
//     bash; right after its turn ends, a second session sharing the store
//     reads it with bash in a new turn (its tool call pulls the store
//     first). The time from the end of the writer's turn to the reader's
//     turn's end with the new content, beside the same bash turn of a
//     session without a memory store, interleaved: the ratio is the cost
//     of the pull and push around a tool call.
//
//   - mounting a store of -memories memories: a new session's first turn
//     with one bash call (sandbox start, first pull of every memory)
//     beside a new session's first such turn without a store,
//     interleaved; then the steady per-call cost with that store.
//
//     go run ./bench/memory [-writes 200] [-mounts 8] [-memories 2000]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/bench/internal/benchclient"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

func main() {
	writes := flag.Int("writes", 200, "write → visible rounds")
	mounts := flag.Int("mounts", 8, "new sessions of each kind for the mount figure")
	memories := flag.Int("memories", 2000, "memories in the store of the mount figure")
	flag.Parse()
	log.SetFlags(0)
	dir, err := os.MkdirTemp("", "reins-bench-memory")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	srv := benchclient.Serve(ctx, app.Config{DataDir: filepath.Join(dir, "server"), IdleLinger: time.Minute})
	defer srv.Close()
	b := &bench{srv: srv, client: srv.Client(&http.Transport{MaxIdleConnsPerHost: 64})}
	var ag ma.Agent
	b.do("POST", "/v1/agents", map[string]any{"name": "bench", "model": "scripted", "tools": []any{map[string]any{"type": "agent_toolset_20260401"}}}, &ag)
	var env ma.Environment
	b.do("POST", "/v1/environments", map[string]any{"name": "bench"}, &env)
	b.agent, b.env = ag.ID, env.ID

	shared := b.newStore(ctx, "shared", 0)
	writer, reader, plain := b.newSession(shared), b.newSession(shared), b.newSession("")
	visible, baseline := b.writeVisible(writer, reader, plain, *writes)
	fmt.Printf("write → visible in another session (%d rounds): p50 %v, p99 %v\n", *writes, visible.p(50), visible.p(99))
	fmt.Printf("  the same bash turn without a memory store, interleaved: p50 %v, p99 %v → %.2fx at p50\n\n",
		baseline.p(50), baseline.p(99), float64(visible.p(50))/float64(baseline.p(50)))

	big := b.newStore(ctx, "big", *memories)
	var withStore, without, raw durations
	for range *mounts {
		withStore = append(withStore, b.firstCall(b.newSession(big), "find /mnt/memory/big -type f | wc -l", fmt.Sprint(*memories)))
		without = append(without, b.firstCall(b.newSession(""), "find /workspace -type f | wc -l", "0"))
		raw = append(raw, rawFiles(filepath.Join(dir, "raw"), *memories))
	}
	mount := withStore.p(50) - without.p(50)
	fmt.Printf("first tool call of a new session, store of %d memories: p50 %v (max %v)\n", *memories, withStore.p(50), withStore.p(100))
	fmt.Printf("  without a store, interleaved: p50 %v (max %v) → mounting costs %v at p50\n",
		without.p(50), without.p(100), mount)
	fmt.Printf("  the same %d files of 1 kB written straight to disk (os.WriteFile, same layout), interleaved: p50 %v → %.2fx\n\n",
		*memories, raw.p(50), float64(mount)/float64(raw.p(50)))
	steady := b.newSession(big)
	b.call(steady, "true")
	var calls, plainCalls durations
	for range 50 {
		t0 := time.Now()
		b.call(steady, "true")
		calls = append(calls, time.Since(t0))
		t0 = time.Now()
		b.call(plain, "true")
		plainCalls = append(plainCalls, time.Since(t0))
	}
	fmt.Printf("a later bash turn with that store mounted: p50 %v; without: p50 %v → %.2fx\n",
		calls.p(50), plainCalls.p(50), float64(calls.p(50))/float64(plainCalls.p(50)))
}

type bench struct {
	srv        *benchclient.Server
	client     *benchclient.Client
	agent, env string
}

func (b *bench) do(method, path string, body, out any) {
	b.client.Do(b.srv.URL, method, path, body, out)
}

// newStore makes a memory store named name holding n memories of 1 kB,
// through the store (the API's rules are not what is measured).
func (b *bench) newStore(ctx context.Context, name string, n int) string {
	st := b.srv.App.Store
	now := time.Now().UTC().Format(time.RFC3339Nano)
	ms := ma.MemoryStore{ID: ids.New(ids.MemoryStore), Type: "memory_store", Name: name, Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateMemoryStore(ctx, ms); err != nil {
		log.Fatal(err)
	}
	body := strings.Repeat("a fact worth keeping. ", 47)[:1000]
	for i := range n {
		p := fmt.Sprintf("/topic-%02d/note-%04d.md", i%40, i)
		if _, err := st.CreateMemory(ctx, store.MemoryWrite{StoreID: ms.ID, MemoryID: ids.New(ids.Memory), VersionID: ids.New(ids.MemoryVersion),
			Path: &p, Content: &body, Actor: &ma.Actor{Type: ma.ActorAPI, APIKeyID: "bench"}, At: time.Now()}); err != nil {
			log.Fatal(err)
		}
	}
	return ms.ID
}

// newSession makes a session of the cloud environment, with the memory
// store storeID mounted read-write ("" for none).
func (b *bench) newSession(storeID string) string {
	body := map[string]any{"agent": b.agent, "environment_id": b.env}
	if storeID != "" {
		body["resources"] = []any{map[string]any{"type": "memory_store", "memory_store_id": storeID}}
	}
	var s ma.Session
	b.do("POST", "/v1/sessions", body, &s)
	return s.ID
}

// call runs one turn of one bash call and returns the tool result's text.
func (b *bench) call(sessionID, command string) string {
	s := b.client.Open(b.srv.URL, sessionID, "")
	defer s.Close()
	input, _ := json.Marshal(map[string]string{"command": command})
	b.do("POST", "/v1/sessions/"+sessionID+"/events", benchclient.Message("@tool bash "+string(input)+"\n@then done"), nil)
	var out string
	for {
		typ, data := s.Next()
		switch typ {
		case ma.EventAgentToolResult:
			var ev ma.Event
			json.Unmarshal(data, &ev)
			for _, blk := range ev.Content {
				out += blk.Text
			}
		case ma.EventStatusIdle:
			return out
		}
	}
}

// writeVisible alternates a write in writer, the read of it in reader
// (timed from the end of the write's turn) and the same read turn in
// plain, without a store.
func (b *bench) writeVisible(writer, reader, plain string, n int) (visible, baseline durations) {
	b.call(writer, "true")
	b.call(reader, "true")
	b.call(plain, "echo 0 > f.md")
	for i := range n {
		b.call(writer, fmt.Sprintf("echo %d > /mnt/memory/shared/f.md", i))
		t0 := time.Now()
		if got := strings.TrimSpace(b.call(reader, "cat /mnt/memory/shared/f.md")); got != fmt.Sprint(i) {
			log.Fatalf("round %d: the reader read %q", i, got)
		}
		visible = append(visible, time.Since(t0))
		t0 = time.Now()
		b.call(plain, "cat f.md")
		baseline = append(baseline, time.Since(t0))
	}
	return visible, baseline
}

// firstCall times a new session's first turn, which runs command and
// must print want.
func (b *bench) firstCall(sessionID, command, want string) time.Duration {
	t0 := time.Now()
	if got := strings.TrimSpace(b.call(sessionID, command)); got != want {
		log.Fatalf("%s printed %q, want %q", command, got, want)
	}
	return time.Since(t0)
}

// rawFiles times writing n files of 1 kB in the layout of newStore's
// memories under dir: the machine's floor for a mount.
func rawFiles(dir string, n int) time.Duration {
	os.RemoveAll(dir)
	body := []byte(strings.Repeat("a fact worth keeping. ", 47)[:1000])
	t0 := time.Now()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("topic-%02d", i%40))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("note-%04d.md", i)), body, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	took := time.Since(t0)
	os.RemoveAll(dir)
	return took
}

type durations []time.Duration

func (d durations) p(q int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*q/100].Round(10 * time.Microsecond)
}
