package sandbox

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	MaybeRun()
	goleak.VerifyTestMain(m)
}

func newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := NewManager(Config{StateDir: t.TempDir(), Limits: Limits{Processes: 64, Memory: 256 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// run runs a shell command in sb and returns its combined output and
// exit status.
func run(t *testing.T, sb *Sandbox, script string) (string, ExitStatus) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	p, err := sb.Spawn(ProcSpec{Argv: []string{"bash", "-c", script}, Stdin: devnull, Stdout: w, Stderr: w, Setsid: true})
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&out, r); r.Close(); close(done) }()
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%q did not end", script)
	}
	<-done
	return out.String(), p.Wait()
}

func TestSandboxBasics(t *testing.T) {
	m := newManager(t)
	ws := t.TempDir()
	sb, err := m.Start(context.Background(), Options{Name: "t1", Workspace: ws, Env: []string{"MY_VAR=hello"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	out, st := run(t, sb, `id; hostname; pwd; echo $MY_VAR; echo hi > f; ls /; ls /proc | grep -c '^[0-9]'; cat /etc/shadow; ls -la /dev; env`)
	t.Logf("%s\n%v", out, st)
	if b, err := os.ReadFile(ws + "/f"); err != nil || string(b) != "hi\n" {
		t.Fatalf("workspace write: %q %v", b, err)
	}
	if !strings.Contains(out, "uid=1000(user)") {
		t.Errorf("not the sandbox user: %s", out)
	}
}
