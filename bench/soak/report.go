package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Failures kept for the summary, and printed as they happen.
const (
	maxReasons = 10
	maxLogged  = 5
)

// recorder counts turns and failures, for the current interval and in
// all.
type recorder struct {
	log *slog.Logger

	mu            sync.Mutex
	interval      []time.Duration
	intervalFails int
	all           []time.Duration
	byKind        map[string][]time.Duration
	fails         int
	reasons       []string
}

func newRecorder(log *slog.Logger) *recorder {
	return &recorder{log: log, byKind: map[string][]time.Duration{}}
}

// turn records a turn of a kind (such as "cloud bash") that went well and
// took d.
func (r *recorder) turn(kind string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.interval = append(r.interval, d)
	r.all = append(r.all, d)
	r.byKind[kind] = append(r.byKind[kind], d)
}

// fail records a failure; the first ones are logged at once.
func (r *recorder) fail(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails++
	r.intervalFails++
	if len(r.reasons) < maxReasons {
		r.reasons = append(r.reasons, reason)
	}
	if r.fails <= maxLogged {
		r.log.Warn("failure", "n", r.fails, "reason", reason)
	}
}

// cut returns the current interval's turn latencies and failures and
// starts the next interval.
func (r *recorder) cut() ([]time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lat, fails := r.interval, r.intervalFails
	r.interval, r.intervalFails = nil, 0
	return lat, fails
}

// totals returns every turn latency, the failure count and the first
// failures' reasons.
func (r *recorder) totals() ([]time.Duration, int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all), r.fails, slices.Clone(r.reasons)
}

// kinds returns the turn latencies by kind.
func (r *recorder) kinds() map[string][]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]time.Duration, len(r.byKind))
	for k, v := range r.byKind {
		out[k] = slices.Clone(v)
	}
	return out
}

// latency is the p50, p99 and max of some durations.
type latency struct{ p50, p99, max time.Duration }

func latencyOf(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q int) time.Duration { return s[(len(s)-1)*q/100] }
	return latency{p50: at(50), p99: at(99), max: s[len(s)-1]}
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// sample is the children's resource use at one moment.
type sample struct {
	at  time.Duration
	srv usage
	exe usage
}

// take samples the server (and its goroutines) and the executor.
func take(srv *server, exe *child, at time.Duration) sample {
	s := sample{at: at}
	s.srv, _ = readUsage(srv.pid())
	if n, err := srv.goroutines(); err == nil {
		s.srv.goroutines = n
	}
	if exe != nil {
		s.exe, _ = readUsage(exe.pid())
	}
	return s
}

// meanSample returns a sample at the time of the last of ss with the mean
// of each resource over ss (goroutines over the probes that read them).
func meanSample(ss []sample) sample {
	m := sample{at: ss[len(ss)-1].at}
	avg := func(get func(sample) (float64, bool)) float64 {
		var sum float64
		var n int
		for _, s := range ss {
			if v, ok := get(s); ok {
				sum += v
				n++
			}
		}
		if n == 0 {
			return -1
		}
		return sum/float64(n) + 0.5
	}
	srv := func(f func(usage) float64) func(sample) (float64, bool) {
		return func(s sample) (float64, bool) { return f(s.srv), true }
	}
	exe := func(f func(usage) float64) func(sample) (float64, bool) {
		return func(s sample) (float64, bool) { return f(s.exe), true }
	}
	rss := func(u usage) float64 { return float64(u.rss) }
	threads := func(u usage) float64 { return float64(u.threads) }
	fds := func(u usage) float64 { return float64(u.fds) }
	m.srv = usage{rss: uint64(avg(srv(rss))), threads: int(avg(srv(threads))), fds: int(avg(srv(fds))),
		goroutines: int(avg(func(s sample) (float64, bool) { return float64(s.srv.goroutines), s.srv.goroutines >= 0 }))}
	m.exe = usage{rss: uint64(avg(exe(rss))), threads: int(avg(exe(threads))), fds: int(avg(exe(fds))), goroutines: -1}
	return m
}

// watcher prints a line every interval.
type watcher struct {
	srv   *server
	exe   *child
	rec   *recorder
	start time.Time
	last  time.Time
	// samples has one sample per full interval: the mean of the probes
	// taken in it.
	samples  []sample
	probes   []sample // of the current interval
	interval time.Duration
	stopc    chan struct{}
	done     chan struct{}
}

// watch prints the header and starts the lines.
func watch(srv *server, exe *child, rec *recorder, interval time.Duration) *watcher {
	now := time.Now()
	w := &watcher{srv: srv, exe: exe, rec: rec, start: now, last: now, interval: interval, stopc: make(chan struct{}), done: make(chan struct{})}
	fmt.Printf("%6s %7s %7s %5s %9s %9s %9s %8s %7s %7s %6s %8s\n",
		"time", "turns", "turns/s", "fail", "p50", "p99", "max", "RSS MiB", "gorout", "threads", "fds", "exec MiB")
	go w.loop()
	return w
}

func (w *watcher) loop() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	probe := time.NewTicker(max(w.interval/probesPerInterval, 100*time.Millisecond))
	defer probe.Stop()
	for {
		select {
		case now := <-t.C:
			w.samples = append(w.samples, w.line(now))
		case now := <-probe.C:
			w.probes = append(w.probes, take(w.srv, w.exe, now.Sub(w.start)))
		case <-w.stopc:
			return
		}
	}
}

// probesPerInterval is how many times an interval samples the resources:
// under traffic, goroutines and open files swing with the sessions live at
// the instant, so a line shows the mean of its interval's probes.
const probesPerInterval = 12

// line prints the interval that ends now and returns its sample.
func (w *watcher) line(now time.Time) sample {
	lat, fails := w.rec.cut()
	l := latencyOf(lat)
	s := meanSample(append(w.probes, take(w.srv, w.exe, now.Sub(w.start))))
	w.probes = w.probes[:0]
	el := s.at.Round(time.Second)
	fmt.Printf("%3d:%02d %7d %7.1f %5d %9s %9s %9s %8.1f %7d %7d %6d %8.1f\n",
		int(el.Minutes()), int(el.Seconds())%60, len(lat), float64(len(lat))/now.Sub(w.last).Seconds(), fails,
		ms(l.p50), ms(l.p99), ms(l.max), mib(s.srv.rss), s.srv.goroutines, s.srv.threads, s.srv.fds, mib(s.exe.rss))
	w.last = now
	return s
}

// stop ends the lines with the partial interval since the last one, if it
// had turns or failures and is not too short to say much (its turns are in
// the totals either way); that line's sample, taken as the traffic winds
// down, is not among the samples.
func (w *watcher) stop() {
	close(w.stopc)
	<-w.done
	if lat, fails := w.rec.peek(); (lat > 0 || fails > 0) && time.Since(w.last) >= w.interval/10 {
		w.line(time.Now())
	}
}

// peek returns the current interval's turn and failure counts.
func (r *recorder) peek() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.interval), r.intervalFails
}

// settle waits up to d for the server's goroutines to come back to the
// baseline's (plus a little) once the traffic is over, and returns the last
// sample.
func settle(ctx context.Context, srv *server, exe *child, baseline sample, d time.Duration) sample {
	start := time.Now()
	for {
		s := take(srv, exe, time.Since(start))
		if (s.srv.goroutines >= 0 && s.srv.goroutines <= baseline.srv.goroutines+leakSlack) || time.Since(start) >= d {
			return s
		}
		select {
		case <-ctx.Done():
			return s
		case <-srv.exited():
			return s
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// result is what the summary reports on.
type result struct {
	elapsed       time.Duration
	samples       []sample
	before, after sample
	serverLog     string
	// executorLog is "" without an executor.
	executorLog string
	// dataBefore and dataAfter are the data dir's sizes.
	dataBefore, dataAfter int64
	// goroutines is the file with the server's goroutines at rest after
	// the traffic, if they did not come back to the baseline (or why it
	// could not be written).
	goroutines string
}

// summarize prints the totals, the resources' flatness and the failures,
// and reports whether the soak passed.
func summarize(cfg config, rec *recorder, res result) bool {
	all, fails, reasons := rec.totals()
	printTotals(all, rec.kinds(), res.elapsed, fails)
	printFlatness(cfg, res)
	printAtRest(res)
	logLines("server log", res.serverLog)
	if res.executorLog != "" {
		logLines("executor log", res.executorLog)
	}
	if fails == 0 {
		fmt.Println("PASS")
		return true
	}
	fmt.Printf("FAIL: %d failures; the first %d:\n", fails, len(reasons))
	for _, r := range reasons {
		fmt.Printf("  %s\n", r)
	}
	return false
}

// printTotals prints the turns, failures and latency, overall and by kind
// of turn.
func printTotals(all []time.Duration, kinds map[string][]time.Duration, elapsed time.Duration, fails int) {
	l := latencyOf(all)
	fmt.Printf("\ntotal: %d turns in %s (%.1f turns/s), %d failures; turn latency p50 %s, p99 %s, max %s\n",
		len(all), elapsed.Round(time.Second), float64(len(all))/elapsed.Seconds(), fails, ms(l.p50), ms(l.p99), ms(l.max))
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		l := latencyOf(kinds[k])
		fmt.Printf("  %-18s %6d turns  p50 %9s  p99 %9s  max %9s\n", k, len(kinds[k]), ms(l.p50), ms(l.p99), ms(l.max))
	}
}

// printFlatness prints, for each resource, its range over the samples
// after the warm-up and its max/min ratio, and the mean of the first half
// of those samples beside the second half's. Their ratio, the growth,
// gives the verdict: the goroutines and open files of a server under
// steady traffic swing with the sessions live at the instant of a sample
// (each has its sandbox, streams and connections), which the range shows,
// while a leak grows from the first half to the second.
func printFlatness(cfg config, res result) {
	var late []sample
	for _, s := range res.samples {
		// A sample due at the end of the warm-up is a little late.
		if s.at.Round(time.Second) > cfg.warmup {
			late = append(late, s)
		}
	}
	if len(late) < 2 {
		fmt.Printf("resources: fewer than 2 samples after the %s warm-up; run longer or with a shorter -interval\n", cfg.warmup)
		return
	}
	fmt.Printf("resources after the %s warm-up (%d samples): range, max/min, mean of the first half → second half, growth (flat: at most %.2f)\n", cfg.warmup, len(late), cfg.flat)
	row := func(name, format string, get func(sample) float64) {
		vs := make([]float64, len(late))
		for i, s := range late {
			vs[i] = get(s)
		}
		lo, hi := slices.Min(vs), slices.Max(vs)
		half := len(vs) / 2
		first, second := mean(vs[:half]), mean(vs[len(vs)-half:])
		growth := second / max(first, 1e-9)
		verdict := "flat"
		if growth > cfg.flat {
			verdict = "GROWING"
		}
		f := func(v float64) string { return fmt.Sprintf(format, v) }
		fmt.Printf("  %-20s %9s – %-9s %5.2f   %9s → %-9s %5.2f %s\n", name, f(lo), f(hi), hi/max(lo, 1e-9), f(first), f(second), growth, verdict)
	}
	row("server RSS MiB", "%.1f", func(s sample) float64 { return mib(s.srv.rss) })
	row("server goroutines", "%.0f", func(s sample) float64 { return float64(s.srv.goroutines) })
	row("server threads", "%.0f", func(s sample) float64 { return float64(s.srv.threads) })
	row("server open files", "%.0f", func(s sample) float64 { return float64(s.srv.fds) })
	if res.executorLog != "" {
		row("executor RSS MiB", "%.1f", func(s sample) float64 { return mib(s.exe.rss) })
		row("executor open files", "%.0f", func(s sample) float64 { return float64(s.exe.fds) })
	}
}

func mean(vs []float64) float64 {
	var sum float64
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}

// printAtRest compares the server at rest before and after the traffic.
func printAtRest(res result) {
	b, a := res.before.srv, res.after.srv
	fmt.Printf("server at rest, before the traffic → %s after it: goroutines %d → %d, open files %d → %d, threads %d → %d, RSS %.1f → %.1f MiB, data dir %.1f → %.1f MiB\n",
		res.after.at.Round(100*time.Millisecond), b.goroutines, a.goroutines, b.fds, a.fds, b.threads, a.threads, mib(b.rss), mib(a.rss),
		mib(uint64(res.dataBefore)), mib(uint64(res.dataAfter)))
	if res.goroutines != "" {
		fmt.Printf("  the goroutines did not come back to the baseline within %s: a leak? Their stacks: %s (kept with -keep)\n", settleTime, res.goroutines)
	}
}

// logLines prints how many warnings and errors a child logged, and the
// first few.
func logLines(name, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Printf("%s: %v\n", name, err)
		return
	}
	var warn, errs int
	var first []string
	for line := range strings.Lines(string(b)) {
		switch {
		case strings.Contains(line, "level=WARN"):
			warn++
		case strings.Contains(line, "level=ERROR"):
			errs++
		default:
			continue
		}
		if len(first) < 5 {
			first = append(first, strings.TrimSpace(line))
		}
	}
	fmt.Printf("%s: %d warnings, %d errors\n", name, warn, errs)
	for _, l := range first {
		fmt.Printf("  %s\n", l)
	}
}
