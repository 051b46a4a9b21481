// Command sandbox benchmarks the per-session sandboxes on this machine and
// prints, in one run:
//
//   - sandbox start: p50 and p99 of the time from Start to a sandbox ready
//     to run processes, and to the first process run in it;
//   - a trivial bash tool call (`true` in the session's persistent shell,
//     through package tools) inside a sandbox against the same call
//     unconfined on the host (no sandbox, no Landlock), interleaved in
//     blocks so both see the same machine, and their ratio;
//   - a new process (`bash -c true`, what processes and terminals cost)
//     inside a sandbox against an unconfined exec;
//   - the memory of an idle sandbox running a session's shell: the
//     proportional set size of its processes, and the server's heap;
//   - an HTTPS request through the egress proxy when it intercepts TLS to
//     substitute a credential, against the same request through a plain
//     CONNECT tunnel, on kept-alive and on new connections.
//
// Usage: go run ./bench/sandbox [-starts 100] [-calls 4000] [-idle 20] [-https 2000]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reinsdev/reins/sandbox"
	"github.com/reinsdev/reins/tools"
)

func main() {
	starts := flag.Int("starts", 100, "sandboxes started for the start figures")
	calls := flag.Int("calls", 4000, "bash tool calls of each kind")
	spawns := flag.Int("spawns", 300, "processes started of each kind")
	idle := flag.Int("idle", 20, "idle sandboxes for the memory figure")
	https := flag.Int("https", 2000, "HTTPS requests of each kind through the egress proxy")
	flag.Parse()
	m, err := sandbox.NewManager(sandbox.Config{StateDir: mustTemp("reins-bench-state-")})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Check(context.Background()); err != nil {
		log.Fatal(err)
	}
	limits, how := m.Limits()
	fmt.Printf("sandbox limits: memory %d MiB, %d processes, %.1f CPU (%s)\n\n", limits.Memory>>20, limits.Processes, limits.CPU, how)
	benchStart(m, *starts)
	benchCalls(m, *calls)
	benchSpawn(m, *spawns)
	benchIdle(m, *idle)
	benchHTTPS(*https)
}

func mustTemp(prefix string) string {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		log.Fatal(err)
	}
	return d
}

func benchStart(m *sandbox.Manager, n int) {
	ws := mustTemp("reins-bench-ws-")
	defer os.RemoveAll(ws)
	null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	defer null.Close()
	var ready, first []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		sb, err := m.Start(context.Background(), sandbox.Options{Name: "bench", Workspace: ws})
		if err != nil {
			log.Fatal(err)
		}
		ready = append(ready, time.Since(t0))
		p, err := sb.Spawn(sandbox.ProcSpec{Argv: []string{"true"}, Stdin: null, Stdout: null, Stderr: null})
		if err != nil {
			log.Fatal(err)
		}
		p.Wait()
		first = append(first, time.Since(t0))
		sb.Close()
	}
	fmt.Printf("sandbox start, %d starts:\n", n)
	fmt.Printf("  ready to run processes     p50 %8s  p99 %8s   (goal p50 < 100ms)\n", pct(ready, 50), pct(ready, 99))
	fmt.Printf("  first process (true) ended p50 %8s  p99 %8s\n\n", pct(first, 50), pct(first, 99))
}

// benchCalls times bash tool calls in a sandboxed and an unconfined
// session, alternating blocks of 50.
func benchCalls(m *sandbox.Manager, n int) {
	boxed := openSession(m)
	defer boxed.close()
	plain := openSession(nil)
	defer plain.close()
	in := json.RawMessage(`{"command":"true"}`)
	for _, s := range []*session{boxed, plain} { // warm up: start the shells
		for i := 0; i < 50; i++ {
			s.call(in)
		}
	}
	var tb, tp []time.Duration
	for len(tb) < n {
		for _, x := range []struct {
			s   *session
			out *[]time.Duration
		}{{boxed, &tb}, {plain, &tp}} {
			for i := 0; i < 50; i++ {
				t0 := time.Now()
				x.s.call(in)
				*x.out = append(*x.out, time.Since(t0))
			}
		}
	}
	fmt.Printf("bash tool call (`true` in the session's shell), %d calls each, interleaved:\n", n)
	fmt.Printf("  in a sandbox       p50 %8s  p99 %8s\n", pct(tb, 50), pct(tb, 99))
	fmt.Printf("  unconfined         p50 %8s  p99 %8s\n", pct(tp, 50), pct(tp, 99))
	fmt.Printf("  ratio              p50 %7.2fx  p99 %7.2fx   (goal p50 <= 1.5x)\n\n", ratio(tb, tp, 50), ratio(tb, tp, 99))
}

// benchSpawn times starting and waiting for `bash -c true` in a sandbox
// and unconfined.
func benchSpawn(m *sandbox.Manager, n int) {
	ws := mustTemp("reins-bench-ws-")
	defer os.RemoveAll(ws)
	sb, err := m.Start(context.Background(), sandbox.Options{Name: "bench", Workspace: ws})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	defer null.Close()
	var tb, tp []time.Duration
	for len(tb) < n {
		for i := 0; i < 10; i++ {
			t0 := time.Now()
			p, err := sb.Spawn(sandbox.ProcSpec{Argv: []string{"bash", "-c", "true"}, Stdin: null, Stdout: null, Stderr: null})
			if err != nil {
				log.Fatal(err)
			}
			p.Wait()
			tb = append(tb, time.Since(t0))
			t0 = time.Now()
			if err := exec.Command("bash", "-c", "true").Run(); err != nil {
				log.Fatal(err)
			}
			tp = append(tp, time.Since(t0))
		}
	}
	fmt.Printf("new process (`bash -c true` started and waited for), %d each:\n", n)
	fmt.Printf("  in a sandbox       p50 %8s  p99 %8s\n", pct(tb, 50), pct(tb, 99))
	fmt.Printf("  unconfined exec    p50 %8s  p99 %8s\n", pct(tp, 50), pct(tp, 99))
	fmt.Printf("  ratio              p50 %7.2fx  (a re-executed launcher confines each process: seccomp, Landlock, limits)\n\n", ratio(tb, tp, 50))
}

// benchIdle keeps n sandboxes with a session's shell each and measures
// what they hold.
func benchIdle(m *sandbox.Manager, n int) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var sessions []*session
	for i := 0; i < n; i++ {
		s := openSession(m)
		s.call(json.RawMessage(`{"command":"true"}`))
		sessions = append(sessions, s)
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	pss := 0
	for _, pid := range descendants(os.Getpid()) {
		pss += pssKiB(pid)
	}
	fmt.Printf("memory, %d idle sandboxes (init + the session's bash):\n", n)
	fmt.Printf("  processes (PSS)    %6d KiB per sandbox\n", pss/n)
	fmt.Printf("  server heap        %6d KiB per sandbox\n", int(after.HeapInuse-before.HeapInuse)/1024/n)
	for _, s := range sessions {
		s.close()
	}
}

// session is a tool session over a workspace, in a sandbox when m is set.
type session struct {
	s  *tools.Session
	w  *tools.Workspace
	ws string
}

func openSession(m *sandbox.Manager) *session {
	ws := mustTemp("reins-bench-ws-")
	opts := tools.WorkspaceOptions{NoSandbox: true}
	if m != nil {
		opts.Launcher = m.Launcher(sandbox.Options{Name: "bench", Workspace: ws})
	}
	w, err := tools.OpenWorkspace(ws, opts)
	if err != nil {
		log.Fatal(err)
	}
	return &session{s: tools.NewSession(w), w: w, ws: ws}
}

func (s *session) call(in json.RawMessage) {
	if r := s.s.Call(context.Background(), "bash", in); r.IsError {
		log.Fatalf("bash: %+v", r)
	}
}

func (s *session) close() {
	s.s.Close()
	s.w.Close()
	os.RemoveAll(s.ws)
}

// descendants lists the processes below pid.
func descendants(pid int) []int {
	var out []int
	kids, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, k := range kids {
		b, _ := os.ReadFile(k)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}

// pssKiB reads a process's proportional set size.
func pssKiB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Microsecond)
}

func ratio(a, b []time.Duration, p int) float64 {
	return float64(pct(a, p)) / float64(pct(b, p))
}
