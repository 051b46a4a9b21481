package idle

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := Start(context.Background(), time.Second)
		defer w.Stop()
		for range 5 {
			time.Sleep(900 * time.Millisecond)
			w.Feed()
		}
		if w.Context().Err() != nil || w.Stalled() != nil {
			t.Fatal("fed watchdog fired")
		}
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if !errors.Is(context.Cause(w.Context()), ErrStalled) {
			t.Fatalf("cause = %v, want ErrStalled", context.Cause(w.Context()))
		}
		if err := w.Stalled(); !errors.Is(err, ErrStalled) {
			t.Fatalf("Stalled = %v", err)
		}
	})
}

func TestWatchdogStopAndDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := Start(context.Background(), time.Second)
		w.Stop()
		w.Feed() // must not re-arm
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if w.Stalled() != nil {
			t.Fatal("stopped watchdog reports a stall")
		}
		if !errors.Is(w.Context().Err(), context.Canceled) {
			t.Fatal("Stop did not release the context")
		}

		off := Start(context.Background(), 0)
		defer off.Stop()
		time.Sleep(time.Hour)
		if off.Context().Err() != nil || off.Stalled() != nil {
			t.Fatal("disabled watchdog fired")
		}
	})
}
