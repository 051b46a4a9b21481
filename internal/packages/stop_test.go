package packages

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// stall serves an install sandbox's egress proxy by accepting its
// connections and answering nothing, until the sandbox closes.
func stall(ln net.Listener) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		held = append(held, c)
	}
}

// TestStopCancelsInstall: Stop cancels an install in flight and returns
// once it has ended: the waiting Ensure fails, no layer or staging
// directory is left, and Ensure after Stop fails with ErrStopped. The
// next start's installer installs the layer anew. TestMain's goleak
// check fails if the install outlives Stop.
func TestStopCancelsInstall(t *testing.T) {
	m := newMirror(t, "reinsdemo", "reins-demo")
	dir := t.TempDir()
	p := &ma.Packages{Pip: []string{"reinsdemo==1.0"}}
	key := Key("env_7", p)
	inst := &Installer{Sandboxes: newManager(t), Dir: dir, Egress: stall, PipIndexURL: m.PipIndexURL(), Timeout: 2 * time.Minute}
	if err := inst.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	installing := make(chan struct{}, 1)
	ensured := make(chan error, 1)
	go func() {
		_, err := inst.Ensure(context.Background(), key, p, func(msg string) {
			if strings.HasPrefix(msg, "installing") {
				installing <- struct{}{}
			}
		})
		ensured <- err
	}()
	select {
	case <-installing:
	case <-time.After(time.Minute):
		t.Fatal("the install did not start")
	}
	time.Sleep(200 * time.Millisecond) // pip is waiting on the proxy
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := inst.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case err := <-ensured:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Ensure of the cancelled install: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled install's waiter was not released")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the cancelled install left %v", left)
	}
	if _, err := inst.Ensure(context.Background(), key, p, nil); !errors.Is(err, ErrStopped) {
		t.Errorf("Ensure after Stop: %v, want ErrStopped", err)
	}

	next := startInstaller(t, &Installer{Sandboxes: newManager(t), Dir: dir, Egress: mirrorEgress, PipIndexURL: m.PipIndexURL(), Timeout: 2 * time.Minute})
	layer, err := next.Ensure(context.Background(), key, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(layer.Dir, "pip", "reinsdemo", "__init__.py")); err != nil {
		t.Errorf("the next start did not install the layer: %v", err)
	}
}
