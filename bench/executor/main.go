// Command executor benchmarks the executor protocol on this machine and
// prints, in one run:
//
//   - the tool-call round trip through a Hub and a remote executor (a
//     Client over loopback TCP) with a no-op tool: p50 and p99 latency of
//     sequential calls, and calls/s with 64 calls in flight;
//   - the same figures for a raw coder/websocket echo of a payload of the
//     same size, and the ratio between the two;
//   - the agent-end turn's protocol overhead (turn.start → session.event →
//     the end seen by the harness's sink), and the same turn through a
//     real server beside a turn of the built-in loop (scripted model), with
//     their ratio;
//   - the memory per idle executor connection on the hub side, with 5,000
//     executors connected from a child process.
//
// Usage: go run ./bench/executor [-calls 5000] [-turns 500] [-turns-per-session 25] [-conns 5000]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/tool"
)

func main() {
	calls := flag.Int("calls", 20000, "sequential calls for the latency figures")
	inflight := flag.Int("inflight", 64, "calls in flight for the throughput figure")
	dur := flag.Duration("duration", 3*time.Second, "duration of each throughput run")
	conns := flag.Int("conns", 5000, "idle executor connections for the memory figure")
	turns := flag.Int("turns", 500, "turns of each loop through a server (built-in loop and agent end); 0 skips them")
	perSession := flag.Int("turns-per-session", 25, "turns per session of the turns through a server (a long session: as many as -turns)")
	child := flag.String("child-clients", "", "internal: connect this many idle executors to URL,KEY")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the sequential tool calls to this file")
	flag.Parse()
	if *child != "" {
		runChildClients(*child)
		return
	}
	fmt.Printf("executor protocol benchmark: %s/%s, %d CPUs, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())

	hub, url, key, stop := startHub()
	lease, client := startExecutor(url, key, hub)
	payload := toolCallPayload()
	fmt.Printf("payload: tool.call frame of %d bytes\n\n", len(payload))

	// Warm up both paths.
	roundTrips(lease, 500)
	echo, closeEcho := startEcho()
	echoLatency(echo, payload, 500)
	mux, closeMux := startMuxEcho()

	rl := requestRoundTrips(lease, *calls)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
	}
	tl, el, ml := interleaved(lease, echo, mux, payload, *calls)
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	tt := toolThroughput(lease, *inflight, *dur)
	et := echoThroughput(echo, payload, *inflight, *dur)
	closeEcho()
	closeMux()

	fmt.Printf("%-34s %10s %10s %14s\n", "", "p50", "p99", fmt.Sprintf("calls/s @%d", *inflight))
	fmt.Printf("%-34s %10s %10s %14.0f\n", "tool call hub→executor (no-op)", tl.p50, tl.p99, tt)
	fmt.Printf("%-34s %10s %10s %14.0f\n", "raw coder/websocket echo", el.p50, el.p99, et)
	fmt.Printf("%-34s %10s %10s\n", "echo read by another goroutine", ml.p50, ml.p99)
	fmt.Printf("%-34s %10s %10s\n", "request answered -32012 (no tool)", rl.p50, rl.p99)
	fmt.Printf("%-34s %9.2fx %9.2fx %13.2fx   (goal p50 ≤ 2x)\n", "ratio tool/raw",
		float64(tl.p50)/float64(el.p50), float64(tl.p99)/float64(el.p99), et/tt)
	fmt.Printf("%-34s %9.2fx %9.2fx\n\n", "ratio tool/echo read by another",
		float64(tl.p50)/float64(ml.p50), float64(tl.p99)/float64(ml.p99))

	client.Stop()
	<-client.Done()
	lease.Release(context.Background())

	// The agent end's protocol overhead: one turn is turn.start, its
	// acknowledgement, and one session.event (agent.message + turn.end)
	// acknowledged after the harness's sink saw it. The sink appends
	// nothing here: the store's commit, the same for either loop, is
	// bench/control's figure.
	brain := startAgentEnd(url, key, hub)
	agentTurns(hub, 500)
	al := agentTurns(hub, *calls/4)
	fmt.Printf("%-34s %10s %10s\n", "agent-end turn (start→event→end)", al.p50, al.p99)
	fmt.Printf("%-34s %9.2fx %9.2fx\n\n", "ratio agent turn/tool call", float64(al.p50)/float64(tl.p50), float64(al.p99)/float64(tl.p99))
	brain.Stop()
	<-brain.Done()
	if *turns > 0 {
		printServerTurns(*turns, *perSession)
	}

	if *conns > 0 {
		idleMemory(hub, url, key, *conns)
	}
	stop()
}

type latency struct{ p50, p99 time.Duration }

func percentiles(d []time.Duration) latency {
	slices.Sort(d)
	return latency{p50: d[len(d)/2].Round(time.Microsecond / 10), p99: d[len(d)*99/100].Round(time.Microsecond / 10)}
}

// noop is the executor's only tool.
type noopSessions struct{}

func (noopSessions) OpenSession(context.Context, executor.Assignment) (executor.Session, error) {
	return noopSession{}, nil
}

type noopSession struct{}

var noopResult = executor.ToolResult{Content: []executor.ContentBlock{executor.TextBlock("ok")}}

func (noopSession) CallTool(context.Context, string, json.RawMessage) executor.ToolResult {
	return noopResult
}
func (noopSession) Close() error { return nil }

type creds struct{ hash string }

func (c creds) VerifyEnvironmentKey(_ context.Context, h string) (string, error) {
	if h == c.hash {
		return "env_bench", nil
	}
	return "", executor.ErrCredentialRejected
}
func (creds) VerifyMachineToken(context.Context, string) (string, error) {
	return "", executor.ErrCredentialRejected
}

func startHub() (*executorhub.Hub, string, string, func()) {
	key, hash := executorhub.NewEnvironmentKey()
	hub := executorhub.NewHub(executorhub.HubOptions{Credentials: creds{hash}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: hub}
	go srv.Serve(ln)
	return hub, "http://" + ln.Addr().String(), key, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hub.Stop(ctx)
		srv.Close()
	}
}

func startExecutor(url, key string, hub *executorhub.Hub) (*executorhub.Lease, *executor.Client) {
	c := executor.NewClient(executor.Options{
		URL: url, EnvironmentKey: key, Executor: executor.ExecutorInfo{Name: "bench"},
		Sessions: noopSessions{}, Capabilities: []string{"tool:noop"}, MaxConcurrentCalls: 1024,
	})
	go c.Run(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ch := hub.Changed("env_bench")
		l, err := hub.Assign(ctx, executorhub.AssignRequest{EnvironmentID: "env_bench", SessionID: "sess_bench", Tools: []string{"noop"}})
		if err == nil {
			return l, c
		}
		if !errors.Is(err, executorhub.ErrNoExecutor) {
			log.Fatal(err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			log.Fatal("executor did not register")
		}
	}
}

var callSeq atomic.Int64

func oneCall(l *executorhub.Lease) time.Duration {
	id := "call_" + strconv.FormatInt(callSeq.Add(1), 10)
	start := time.Now()
	res, err := l.CallTool(context.Background(), tool.Call{ID: id, Name: "noop", Input: json.RawMessage(`{"command":"true"}`)})
	if err != nil || res.IsError {
		log.Fatalf("tool call: %v %+v", err, res)
	}
	return time.Since(start)
}

// requestRoundTrips measures one JSON-RPC request and its error response
// through the same connection (terminal.close, which the no-op executor
// answers at once with -32012).
func requestRoundTrips(l *executorhub.Lease, n int) latency {
	d := make([]time.Duration, n)
	p := map[string]string{"session_id": "sess_bench", "terminal_id": "t"}
	for i := range d {
		start := time.Now()
		l.Call(context.Background(), "terminal.close", p, nil)
		d[i] = time.Since(start)
	}
	return percentiles(d)
}

func roundTrips(l *executorhub.Lease, n int) latency {
	d := make([]time.Duration, n)
	for i := range d {
		d[i] = oneCall(l)
	}
	return percentiles(d)
}

// interleaved measures n tool calls, n raw echoes and n echoes read by
// another goroutine, in alternating blocks of 50, so that all three see the
// same state of a shared, noisy machine.
func interleaved(l *executorhub.Lease, echo *websocket.Conn, mux *muxEcho, payload []byte, n int) (tool, raw, handoff latency) {
	const block = 50
	td := make([]time.Duration, 0, n)
	ed := make([]time.Duration, 0, n)
	md := make([]time.Duration, 0, n)
	ctx := context.Background()
	for len(td) < n {
		k := min(block, n-len(td))
		for range k {
			td = append(td, oneCall(l))
		}
		for range k {
			start := time.Now()
			if err := echo.Write(ctx, websocket.MessageText, payload); err != nil {
				log.Fatal(err)
			}
			if _, _, err := echo.Read(ctx); err != nil {
				log.Fatal(err)
			}
			ed = append(ed, time.Since(start))
		}
		for range k {
			md = append(md, mux.roundTrip(payload))
		}
	}
	return percentiles(td), percentiles(ed), percentiles(md)
}

// muxEcho is an echo whose answers are read by a goroutine of their own
// and handed to the caller over a channel: the one hand-off any connection
// that multiplexes requests (the hub's included) pays on top of the raw
// echo.
type muxEcho struct {
	ws      *websocket.Conn
	answers chan []byte
}

func startMuxEcho() (*muxEcho, func()) {
	ws, stop := startEcho()
	m := &muxEcho{ws: ws, answers: make(chan []byte, 1)}
	go func() {
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				close(m.answers)
				return
			}
			m.answers <- b
		}
	}()
	return m, stop
}

func (m *muxEcho) roundTrip(payload []byte) time.Duration {
	start := time.Now()
	if err := m.ws.Write(context.Background(), websocket.MessageText, payload); err != nil {
		log.Fatal(err)
	}
	if _, ok := <-m.answers; !ok {
		log.Fatal("echo connection lost")
	}
	return time.Since(start)
}

func toolThroughput(l *executorhub.Lease, inflight int, dur time.Duration) float64 {
	var n atomic.Int64
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	start := time.Now()
	for range inflight {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				oneCall(l)
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// toolCallPayload is a tool.call frame as the hub sends it.
func toolCallPayload() []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 12345, "method": "tool.call", "params": map[string]any{
		"session_id": "sess_bench", "lease_id": "lease_0123456789abcdef0123", "tool_call_id": "call_12345",
		"name": "noop", "input": map[string]string{"command": "true"}}})
	return b
}

// startEcho runs a raw coder/websocket echo server over loopback and
// returns a connection to it.
func startEcho() (*websocket.Conn, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := context.Background()
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if err := ws.Write(ctx, typ, b); err != nil {
				return
			}
		}
	})}
	go srv.Serve(ln)
	ws, _, err := websocket.Dial(context.Background(), "ws://"+ln.Addr().String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	return ws, func() { ws.Close(websocket.StatusNormalClosure, ""); srv.Close() }
}

func echoLatency(ws *websocket.Conn, payload []byte, n int) latency {
	ctx := context.Background()
	d := make([]time.Duration, n)
	for i := range d {
		start := time.Now()
		if err := ws.Write(ctx, websocket.MessageText, payload); err != nil {
			log.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			log.Fatal(err)
		}
		d[i] = time.Since(start)
	}
	return percentiles(d)
}

func echoThroughput(ws *websocket.Conn, payload []byte, inflight int, dur time.Duration) float64 {
	ctx := context.Background()
	slots := make(chan struct{}, inflight)
	stop := make(chan struct{})
	var sent atomic.Int64
	go func() {
		for {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			if err := ws.Write(ctx, websocket.MessageText, payload); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	start := time.Now()
	n := 0
	for time.Since(start) < dur {
		if _, _, err := ws.Read(ctx); err != nil {
			log.Fatal(err)
		}
		<-slots
		n++
	}
	elapsed := time.Since(start)
	close(stop)
	for int64(n) < sent.Load() { // drain what is in flight
		ws.Read(ctx)
		n++
	}
	return float64(n-(int(sent.Load())-n)) / elapsed.Seconds()
}

// idleMemory connects conns idle executors from a child process (so that
// only the hub's side is measured here) and reports the hub's memory per
// connection.
func idleMemory(hub *executorhub.Hub, url, key string, conns int) {
	before := memNow()
	cmd := exec.Command(os.Args[0], "-child-clients", fmt.Sprintf("%d,%s,%s", conns, url, key))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	for {
		n := len(hub.Executors())
		if n >= conns {
			break
		}
		if time.Since(start) > 5*time.Minute {
			log.Fatalf("only %d of %d executors registered", n, conns)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(time.Second)
	after := memNow()
	stdin.Close() // the child exits when its stdin closes
	cmd.Wait()
	per := func(a, b uint64) float64 { return float64(int64(b)-int64(a)) / float64(conns) / 1024 }
	fmt.Printf("idle executor connections: %d registered in %s\n", conns, took.Round(time.Millisecond))
	fmt.Printf("  hub heap+stacks per connection: %6.1f KiB   (goal < 64 KiB)\n", per(before.heapStack, after.heapStack))
	fmt.Printf("  hub RSS per connection:         %6.1f KiB\n", per(before.rss, after.rss))
	fmt.Printf("  goroutines per connection:      %6.2f\n", float64(after.goroutines-before.goroutines)/float64(conns))
}

type mem struct {
	heapStack, rss uint64
	goroutines     int
}

func memNow() mem {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := mem{heapStack: ms.HeapInuse + ms.StackInuse, goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				m.rss = kb * 1024
			}
		}
	}
	return m
}

func runChildClients(arg string) {
	parts := strings.SplitN(arg, ",", 3)
	n, _ := strconv.Atoi(parts[0])
	url, key := parts[1], parts[2]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // connect 64 at a time
	for i := range n {
		sem <- struct{}{}
		c := executor.NewClient(executor.Options{
			URL: url, EnvironmentKey: key, Executor: executor.ExecutorInfo{Name: fmt.Sprintf("idle-%d", i)},
			Sessions: noopSessions{}, Capabilities: []string{"tool:noop"},
			OnEvent: func(e executor.Event) {
				if e.Type == executor.EventRegistered {
					select {
					case <-sem:
					default:
					}
				}
			},
		})
		wg.Go(func() { c.Run(ctx) })
	}
	buf := make([]byte, 1)
	os.Stdin.Read(buf) // wait for the parent
	cancel()
	wg.Wait()
}
