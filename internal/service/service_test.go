package service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// worker is a service with one goroutine that runs until Stop.
type worker struct {
	Base
	ran chan struct{}
}

func (w *worker) Start(ctx context.Context) error {
	if _, err := w.Begin(ctx); err != nil {
		return err
	}
	w.Go(func(ctx context.Context) { close(w.ran); <-ctx.Done() })
	return nil
}

func (w *worker) Stop(ctx context.Context) error { return w.Halt(ctx) }

// TestBase: Start runs the goroutine under a context that Start's own
// context does not end; Stop ends it and waits for it; the signals close
// in order; Stop again is harmless; Start after Stop fails and Go runs
// nothing.
func TestBase(t *testing.T) {
	w := &worker{ran: make(chan struct{})}
	select {
	case <-w.Started():
		t.Fatal("started before Start")
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // bounds the start only
	<-w.ran
	<-w.Started()
	if err := w.Context().Err(); err != nil {
		t.Fatalf("the service's context ended with Start's: %v", err)
	}
	if err := w.Start(context.Background()); err == nil {
		t.Error("a second Start succeeded")
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-w.Stopped()
	if err := w.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := w.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped", err)
	}
	if w.Go(func(context.Context) { t.Error("ran after Stop") }) {
		t.Error("Go after Stop reported true")
	}
	if w.Context().Err() == nil {
		t.Error("the context lives on after Stop")
	}
}

// TestStopBeforeStart: a service stopped before it started is stopped,
// and does not start.
func TestStopBeforeStart(t *testing.T) {
	var b Base
	if err := b.Halt(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-b.Stopped()
	if _, err := b.Begin(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Begin after Halt: %v", err)
	}
}

// TestStopDeadline: Stop gives up waiting at its context's deadline and
// says so; the stopped signal closes once the goroutine ends.
func TestStopDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Base
		if _, err := b.Begin(context.Background()); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		b.Go(func(context.Context) { <-release }) // ignores its context
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := b.Halt(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still running") {
			t.Fatalf("Halt: %v", err)
		}
		select {
		case <-b.Stopped():
			t.Fatal("stopped with a goroutine running")
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case <-b.Stopped():
		default:
			t.Fatal("not stopped once the goroutine ended")
		}
	})
}

// step records its start and stop in a shared log.
type step struct {
	name     string
	log      *[]string
	startErr error
}

func (s step) Start(context.Context) error {
	*s.log = append(*s.log, "start "+s.name)
	return s.startErr
}

func (s step) Stop(context.Context) error {
	*s.log = append(*s.log, "stop "+s.name)
	return nil
}

// TestGroup: services start in the order they were added, up to the
// first that fails, and all stop in the reverse order, started or not.
func TestGroup(t *testing.T) {
	var log []string
	var g Group
	ctx := context.Background()
	g.Add("a", step{name: "a", log: &log})
	g.Add("b", step{name: "b", log: &log, startErr: errors.New("boom")})
	g.Add("c", step{name: "c", log: &log})
	err := g.Start(ctx)
	if err == nil || err.Error() != "b: boom" {
		t.Fatalf("Start: %v, want b: boom", err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	want := "start a,start b,stop c,stop b,stop a"
	if got := strings.Join(log, ","); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
