package packages

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/pkgmirror"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newManager(t *testing.T) *sandbox.Manager {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// newInstaller returns a started installer that installs from m; it
// stops at the test's end.
func newInstaller(t *testing.T, m *pkgmirror.Mirror) *Installer {
	t.Helper()
	return startInstaller(t, &Installer{Sandboxes: newManager(t), Dir: t.TempDir(), Egress: mirrorEgress,
		PipIndexURL: m.PipIndexURL(), NpmRegistry: m.NpmRegistry(), Timeout: 2 * time.Minute})
}

// startInstaller starts inst and stops it at the test's end.
func startInstaller(t *testing.T, inst *Installer) *Installer {
	t.Helper()
	if err := inst.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := inst.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return inst
}

// lines collects progress lines.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.l = append(l.l, s); l.mu.Unlock() }

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.l, "\n")
}

// TestEnsureInstallsOnce: Ensure installs pip and npm packages into a
// layer that a session's sandbox can use, and a second Ensure of the same
// key reuses it without downloading anything.
func TestEnsureInstallsOnce(t *testing.T) {
	m := newMirror(t, "reinsdemo", "reins-demo")
	inst := newInstaller(t, m)
	p := &ma.Packages{Type: "packages", Pip: []string{"reinsdemo==1.0"}, Npm: []string{"reins-demo@1.0.0"}}
	key := Key("env_1", p)
	var progress lines
	t0 := time.Now()
	layer, err := inst.Ensure(context.Background(), key, p, progress.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first Ensure: %s", time.Since(t0))
	if want := filepath.Join(inst.Dir, key); layer.Dir != want {
		t.Errorf("layer dir %s, want %s", layer.Dir, want)
	}
	if wheel, tgz := m.Fetched(); wheel != 1 || tgz != 1 {
		t.Errorf("downloads: wheel %d, tarball %d; want 1 each", wheel, tgz)
	}
	for _, want := range []string{"installing 1 pip package: reinsdemo==1.0", "installing 1 npm package: reins-demo@1.0.0", "installed in "} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}

	t0 = time.Now()
	again, err := inst.Ensure(context.Background(), key, p, nil)
	took := time.Since(t0)
	t.Logf("second Ensure: %s", took)
	if err != nil || again.Dir != layer.Dir {
		t.Fatalf("second Ensure: %+v %v", again, err)
	}
	if wheel, tgz := m.Fetched(); wheel != 1 || tgz != 1 || took > time.Second {
		t.Errorf("the second Ensure reinstalled: downloads %d %d, took %s", wheel, tgz, took)
	}

	out := runWithLayer(t, layer, `python3 -c 'import reinsdemo; print("py", reinsdemo.VALUE)'; node -e 'console.log("js", require("reins-demo").value)'`)
	if !strings.Contains(out, "py 42\n") || !strings.Contains(out, "js 42\n") {
		t.Errorf("the packages are not usable in a sandbox:\n%s", out)
	}
}

// runWithLayer runs a shell script in a new sandbox with layer bound and
// its Env set, and returns the script's output.
func runWithLayer(t *testing.T, layer Layer, script string) string {
	t.Helper()
	sb, err := newManager(t).Start(context.Background(), sandbox.Options{Name: "session", Workspace: t.TempDir(),
		Binds: layer.Bind(), Env: layer.Env})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var out bytes.Buffer
	st, err := runIn(context.Background(), sb, []string{"bash", "-c", script}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 0 {
		t.Errorf("%s: %s", script, st)
	}
	return out.String()
}

// TestEnsureUnknownPackage: a failed install names the manager and the
// package and quotes the manager, and leaves no layer behind.
func TestEnsureUnknownPackage(t *testing.T) {
	m := newMirror(t, "reinsdemo", "reins-demo")
	inst := newInstaller(t, m)
	for _, tc := range []struct {
		p    *ma.Packages
		want []string
	}{
		{&ma.Packages{Pip: []string{"nosuchpkg==1.0"}}, []string{"pip install failed for nosuchpkg==1.0", "No matching distribution found for nosuchpkg==1.0"}},
		{&ma.Packages{Npm: []string{"no-such-pkg"}}, []string{"npm install failed for no-such-pkg", "404"}},
	} {
		_, err := inst.Ensure(context.Background(), Key("env_2", tc.p), tc.p, nil)
		if err == nil {
			t.Fatalf("%+v: installed", tc.p)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
	}
	if left, _ := os.ReadDir(inst.Dir); len(left) != 0 {
		t.Errorf("failed installs left %v", left)
	}
}

// TestEnsureConcurrent: concurrent Ensure calls for one key install once.
func TestEnsureConcurrent(t *testing.T) {
	m := newMirror(t, "reinsdemo", "reins-demo")
	inst := newInstaller(t, m)
	p := &ma.Packages{Pip: []string{"reinsdemo"}}
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	for n := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := inst.Ensure(context.Background(), "env_3-x", p, nil)
			if err != nil {
				t.Error(err)
			}
			dirs[n] = l.Dir
		}()
	}
	wg.Wait()
	if wheel, _ := m.Fetched(); wheel != 1 {
		t.Errorf("%d downloads of the wheel, want 1", wheel)
	}
	for _, d := range dirs {
		if d != dirs[0] || d == "" {
			t.Errorf("layers %v", dirs)
		}
	}
}

// TestEnsureLeftoverStaging: a staging directory left by a crash is not
// taken for a layer; it is replaced.
func TestEnsureLeftoverStaging(t *testing.T) {
	m := newMirror(t, "reinsdemo", "reins-demo")
	inst := newInstaller(t, m)
	p := &ma.Packages{Pip: []string{"reinsdemo"}}
	junk := filepath.Join(inst.Dir, ".staging-env_4-x", "pip", "junk")
	os.MkdirAll(junk, 0o755)
	l, err := inst.Ensure(context.Background(), "env_4-x", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir, "pip", "reinsdemo", "__init__.py")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir, "pip", "junk")); err == nil {
		t.Error("the leftover staging directory's content is in the layer")
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(junk))); err == nil {
		t.Error("the staging directory is still there")
	}
}

// TestEnsureNothing: no packages, no layer and no sandbox.
func TestEnsureNothing(t *testing.T) {
	inst := startInstaller(t, &Installer{Dir: t.TempDir()})
	l, err := inst.Ensure(context.Background(), "env_5-x", &ma.Packages{Type: "packages", Pip: []string{}}, nil)
	if err != nil || l.Dir != "" || l.Bind() != nil {
		t.Errorf("%+v %v", l, err)
	}
}

// TestEnsureGo: `go install` builds a command from a module proxy into
// the layer's PATH.
func TestEnsureGo(t *testing.T) {
	if _, err := lookInSandbox("/usr/local/go/bin/go"); err != nil {
		t.Skip(err)
	}
	if testing.Short() {
		t.Skip("builds the Go runtime in a sandbox")
	}
	m := newMirror(t, "reinsdemo", "reins-demo")
	inst := newInstaller(t, m)
	inst.GoProxy, inst.GoSumDB = m.GoProxy(), "off"
	p := &ma.Packages{Go: []string{pkgmirror.GoModule + "@v1.0.0"}}
	t0 := time.Now()
	layer, err := inst.Ensure(context.Background(), "env_6-x", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("go install: %s", time.Since(t0))
	if out := runWithLayer(t, layer, "hello 2>&1"); out != "hello from go\n" {
		t.Errorf("hello: %q", out)
	}
}
