// Command soak runs a real `reins serve` child process under steady mixed
// traffic for a while and watches it for leaks and failures.
//
// It builds cmd/reins (or takes -reins), starts `reins serve` on a fresh
// data dir with the offline `scripted` model and --debug-addr, and a
// `reins executor` child serving one self-hosted environment. Then
// -clients clients, each with the official Go SDK, loop until -duration
// is over: create a session (an agent with the built-in toolset), open
// its event stream, run five turns (text, bash, text, bash, text), each
// until session.status_idle on the stream, and delete the session. The
// sessions of -hosted of the clients run in the self-hosted environment,
// so their bash calls go through the executor; the others' run in a cloud
// environment, in the server's own sandboxes.
//
// Every -interval it prints one line: the turns and failures of the
// interval, the turn latency (send to session.status_idle) p50, p99 and
// max, and the server's RSS, goroutines (from /debug/pprof/goroutine),
// threads and open files, and the executor's RSS: each the mean of 12
// probes taken during the interval. At the end it prints
// the totals and, from the samples after -warmup, each resource's range
// and its growth from the first half of those samples to the second (the
// mean of each): a flat server has growths near 1, and at rest after the
// traffic its goroutines come back to where they were before it. Go never
// gives threads back, so their count climbs to a plateau; read its trend
// in the lines.
//
// A failure is any error: an SDK error, a session.error event, a tool
// result with is_error, an answer other than the scripted one, a turn that
// did not end within -turn-timeout, a child process that exits. The first
// failures are printed with their reasons; the exit status is 1 if there
// was any.
//
//	go run ./bench/soak -clients 20 -duration 10m
//	go run ./bench/soak -clients 5 -duration 2m -interval 20s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	clients     int
	hosted      int
	duration    time.Duration
	interval    time.Duration
	warmup      time.Duration
	turnTimeout time.Duration
	think       time.Duration
	serveArgs   string
	flat        float64
	reins       string
	keep        bool
}

func main() {
	var cfg config
	flag.IntVar(&cfg.clients, "clients", 20, "clients running sessions at once")
	flag.IntVar(&cfg.hosted, "hosted", -1, "how many of the clients run their sessions in the self-hosted environment served by a reins executor (-1: a fifth, at least 1)")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Minute, "how long the clients start new sessions")
	flag.DurationVar(&cfg.interval, "interval", time.Minute, "report period")
	flag.DurationVar(&cfg.warmup, "warmup", time.Minute, "resource samples up to this time are left out of the flatness summary (at most half of -duration)")
	flag.DurationVar(&cfg.turnTimeout, "turn-timeout", 30*time.Second, "a turn not idle this long after its message was sent is a failure")
	flag.DurationVar(&cfg.think, "think", 0, "each client's pause after a turn before its next message, as a person or a driver reading the answer would (0: none, every client sends as fast as the server answers)")
	flag.StringVar(&cfg.serveArgs, "serve-args", "", "more flags for reins serve, space-separated (e.g. \"--sandbox-memory 512M\")")
	flag.Float64Var(&cfg.flat, "flat", 1.1, "the growth (second half's mean over the first half's, after -warmup) up to which a resource counts as flat")
	flag.StringVar(&cfg.reins, "reins", "", "reins binary to run (default: go build ./cmd/reins into the work dir)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the work dir (data dir, server and executor logs)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := cfg.check(); err != nil {
		log.Error("bad flags", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, cfg, log)
	if err != nil {
		log.Error("soak", "err", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// check refuses flag values the soak cannot run with, and resolves -hosted.
func (c *config) check() error {
	switch {
	case c.clients < 1:
		return fmt.Errorf("-clients: want at least 1, got %d", c.clients)
	case c.hosted > c.clients:
		return fmt.Errorf("-hosted: want at most -clients (%d), got %d", c.clients, c.hosted)
	case c.duration <= 0 || c.interval <= 0 || c.turnTimeout <= 0:
		return errors.New("-duration, -interval and -turn-timeout must be positive")
	case c.flat < 1:
		return fmt.Errorf("-flat: want a ratio of at least 1, got %g", c.flat)
	}
	if c.hosted < 0 {
		c.hosted = max(1, (c.clients+4)/5)
	}
	c.warmup = min(c.warmup, c.duration/2)
	return nil
}

// run prepares the rig, drives the traffic and prints the report. It
// reports whether the soak passed: no failure.
func run(ctx context.Context, cfg config, log *slog.Logger) (bool, error) {
	dir, err := os.MkdirTemp("", "reins-soak")
	if err != nil {
		return false, err
	}
	if cfg.keep {
		defer log.Info("work dir kept", "dir", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	r, err := prepare(ctx, cfg, dir, log)
	if r != nil {
		defer r.stop()
	}
	if err != nil {
		return false, err
	}
	fmt.Printf("reins soak: %d clients (%d in the self-hosted environment) for %s, %s, GOMAXPROCS=%d, %d CPUs\n",
		cfg.clients, cfg.hosted, cfg.duration, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Printf("server pid %d, executor pid %d, work dir %s\n\n", r.srv.pid(), r.exe.pid(), dir)
	// One session in each environment first, so that what the server
	// starts once is in the baseline.
	if err := warm(ctx, cfg, r.world, log); err != nil {
		return false, err
	}
	rec := newRecorder(log)
	return summarize(cfg, rec, r.soak(ctx, cfg, rec)), nil
}

// rig is what the soak runs against.
type rig struct {
	dir   string
	srv   *server
	exe   *child // nil without a self-hosted environment
	world *world
}

// prepare builds reins unless cfg names a binary, starts the server,
// creates the agent and environments, and starts the executor. A non-nil
// rig must be stopped, also with an error.
func prepare(ctx context.Context, cfg config, dir string, log *slog.Logger) (*rig, error) {
	bin := cfg.reins
	if bin == "" {
		bin = filepath.Join(dir, "reins")
		log.Info("building reins", "bin", bin)
		if err := build(ctx, bin); err != nil {
			return nil, err
		}
	}
	srv, err := startServer(ctx, bin, dir, strings.Fields(cfg.serveArgs), log)
	if err != nil {
		return nil, err
	}
	r := &rig{dir: dir, srv: srv}
	if r.world, err = setUp(ctx, srv, cfg); err != nil {
		return r, err
	}
	if cfg.hosted > 0 {
		r.exe, err = startExecutor(ctx, bin, dir, srv.url, r.world.envKey, cfg.hosted)
	}
	return r, err
}

// stop stops the executor, then the server; it returns their failures to
// stop cleanly.
func (r *rig) stop() []error {
	var errs []error
	if err := r.exe.stop(executorGrace); err != nil {
		errs = append(errs, err)
	}
	if err := r.srv.stop(serverGrace); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// soak takes the baseline, runs the traffic with a line every interval,
// lets the server settle, and stops the rig: what the summary needs.
func (r *rig) soak(ctx context.Context, cfg config, rec *recorder) result {
	// The clients' idle connections are not the server's to count.
	r.world.transport.CloseIdleConnections()
	res := result{before: take(r.srv, r.exe, 0), dataBefore: dirSize(r.srv.dataDir), serverLog: r.srv.log}
	start := time.Now()
	w := watch(r.srv, r.exe, rec, cfg.interval)
	traffic(ctx, cfg, r.world, rec, r.srv.child, r.exe)
	w.stop()
	res.elapsed, res.samples = time.Since(start), w.samples
	r.world.transport.CloseIdleConnections()
	res.after = settle(ctx, r.srv, r.exe, res.before, settleTime)
	res.dataAfter = dirSize(r.srv.dataDir)
	if res.after.srv.goroutines > res.before.srv.goroutines+leakSlack {
		res.goroutines = filepath.Join(r.dir, "goroutines.txt")
		if err := r.srv.saveGoroutines(res.goroutines); err != nil {
			res.goroutines = err.Error()
		}
	}
	if r.exe != nil {
		res.executorLog = r.exe.log
	}
	for _, err := range r.stop() {
		rec.fail(err.Error())
	}
	return res
}

// How long the executor is given to stop, and how long the server's
// goroutines are given to come back to their number before the traffic.
const (
	executorGrace = 10 * time.Second
	settleTime    = 45 * time.Second
)

// leakSlack is how many goroutines more than before the traffic the server
// may have at rest after it.
const leakSlack = 5
