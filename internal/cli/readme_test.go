package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeanthropic"
)

// readmeBlocks returns the shell blocks of README.md marked for this test:
// the one marked "readme-test: serve" and, in order, those marked
// "readme-test".
func readmeBlocks(t *testing.T) (serve string, blocks []string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- readme-test(: serve)? -->\\n```sh\\n(.*?)```")
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if m[1] != "" {
			serve = m[2]
			continue
		}
		blocks = append(blocks, m[2])
	}
	if serve == "" || len(blocks) < 4 {
		t.Fatalf("README.md has %d marked blocks and serve block %q", len(blocks), serve)
	}
	return serve, blocks
}

// TestREADME runs the README's blocks as written, in a fresh home with a
// data dir and a port that are not the defaults, with the Claude setup the
// README describes (ANTHROPIC_API_KEY set; the Messages API is a fake).
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("runs reins processes and the README's commands")
	}
	serveBlock, blocks := readmeBlocks(t)
	fake := fakeanthropic.New(t)
	fake.Push(fakeanthropic.Text("Hello from the fake Claude"))
	home := t.TempDir()
	addr := freePort(t)
	dataDir := filepath.Join(home, "reins-data")
	bin := reinsDir(t)
	env := reinsEnv(t, bin, append(goEnv(t, home), "HOME="+home, "REINS_ADDR="+addr, "REINS_DATA_DIR="+dataDir,
		"ANTHROPIC_API_KEY=sk-ant-fake-key-for-claude", "ANTHROPIC_BASE_URL="+fake.URL)...)

	// The serve block runs in the module's root, as in a checkout; `go
	// run` builds reins (in the test's build cache: warm, but a cold one
	// takes minutes) and runs it as its child, so the whole process group
	// is interrupted at the end.
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	srv := startOnTerminal(t, env, "bash", "-c", "cd "+root+"\n"+strings.TrimSpace(serveBlock))
	t.Cleanup(func() { syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL) })
	srv.waitFor(`reins is serving`, 10*time.Minute)
	defer func() {
		syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-srv.exit:
		case <-time.After(30 * time.Second):
			t.Errorf("the README's server did not stop on SIGINT")
		}
	}()

	// The script ends the background jobs the blocks start (the event
	// stream, the executor) once the executor's turn is done.
	script := strings.Join(blocks, "\n") + "\nkill $(jobs -p) 2>/dev/null || true\n"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := shell(t, ctx, env, root, script) // in the checkout, as `go install ./cmd/reins` needs
	if err != nil {
		t.Fatalf("README blocks failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"demo",                       // reins agents list
		"Hello from the fake Claude", // sessions run on the demo agent (claude-sonnet-5-5)
		`"type":"user.message"`,      // the curl send echoes the event
		"You said: Hello",            // the curl stream shows the scripted answer
		"hi from",                    // the executor ran bash
	} {
		if !strings.Contains(out, want) {
			t.Errorf("README output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rejected the API key") {
		t.Errorf("the CLI sent a key the server refused:\n%s", out)
	}
}

// goEnv keeps the go command's caches and settings in an environment whose
// HOME is a fresh directory (where the defaults would be a cold cache),
// with a GOPATH of its own under home, so that `go install` installs there.
func goEnv(t *testing.T, home string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	v := strings.Split(string(out), "\n")
	return []string{"GOCACHE=" + v[0], "GOMODCACHE=" + v[1], "GOPROXY=" + v[2], "GOFLAGS=" + v[3], "GOTOOLCHAIN=" + v[4],
		"GOPATH=" + filepath.Join(home, "go")}
}

// TestREADMEGoSDK builds the README's Go SDK program as written (the block
// marked "readme-test: go sdk") inside this module, so with its pinned
// anthropic-sdk-go, and runs it as the README says against a live server:
// it creates a session on the demo agent, sends "Hello" and prints the
// events' types until the session is idle.
func TestREADMEGoSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the README's Go program")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- readme-test: go sdk -->\n```go\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no Go SDK block marked <!-- readme-test: go sdk -->")
	}
	// A directory under testdata is in the module but outside ./... .
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "readmegosdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(dir)
		os.Remove("testdata") // when nothing else is in it
	})
	if err := os.WriteFile(filepath.Join(dir, "main.go"), m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "readme-go-sdk")
	if out, err := exec.Command("go", "build", "-o", bin, "./"+dir).CombinedOutput(); err != nil {
		t.Fatalf("the README's Go program does not build: %v\n%s", err, out)
	}
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, s.agentID, s.envID)
	cmd.Env = append(os.Environ(), "REINS_URL="+s.url, "REINS_API_KEY="+s.key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's Go program failed: %v\n%s", err, out)
	}
	for _, want := range []string{"session.status_running", "agent.message", "session.status_idle"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the program's output lacks %s:\n%s", want, out)
		}
	}
}
