package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
	env := reinsEnv(t, bin, "HOME="+home, "REINS_ADDR="+addr, "REINS_DATA_DIR="+dataDir,
		"ANTHROPIC_API_KEY=sk-ant-fake-key-for-claude", "ANTHROPIC_BASE_URL="+fake.URL)

	srv := startOnTerminal(t, env, "bash", "-c", strings.TrimSpace(serveBlock))
	srv.waitFor(`reins is serving`, 60*time.Second)
	defer srv.cmd.Process.Signal(os.Interrupt)

	// The script ends the background jobs the blocks start (the event
	// stream, the executor) once the executor's turn is done.
	script := strings.Join(blocks, "\n") + "\nkill $(jobs -p) 2>/dev/null || true\n"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := shell(t, ctx, env, home, script)
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
