package cli

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// runOnTerminal runs the CLI with a pseudo-terminal as stdin, stdout and
// stderr. answer is called with the output so far whenever more arrives,
// and returns what to type (or "").
func runOnTerminal(t *testing.T, s *testServer, answer func(out string) string, args ...string) (string, error) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var out syncBuilder
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		io.Copy(&out, ptmx)
	}()

	root := newRootCommand()
	root.SetArgs(append(args, "--url", s.url, "--api-key", s.key))
	root.SetIn(tty)
	root.SetOut(tty)
	root.SetErr(tty)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(context.Background()) }()

	var runErr error
	timeout := time.After(20 * time.Second)
loop:
	for seen := 0; ; {
		select {
		case runErr = <-done:
			break loop
		case <-timeout:
			t.Fatalf("timed out; output so far:\n%q", out.String())
		case <-time.After(20 * time.Millisecond):
			if o := out.String(); len(o) > seen {
				seen = len(o)
				if typed := answer(o); typed != "" {
					ptmx.WriteString(typed)
				}
			}
		}
	}
	// Let the last output drain, then end the reader.
	time.Sleep(50 * time.Millisecond)
	tty.Close()
	ptmx.Close()
	<-readDone
	return out.String(), runErr
}

func TestSessionsRunOnTerminalAsks(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "agents", "create", "--name", "asker", "--model", "scripted", "--toolset", "always_ask", "--custom-tool", "lookup").must(t)
	agent := regexp.MustCompile(`agent_\w+`).FindString(r.stdout)

	answered := map[string]bool{}
	out, err := runOnTerminal(t, s, func(o string) string {
		switch {
		case strings.Contains(o, "allow bash") && strings.Contains(o, "[y/N]") && !answered["bash"]:
			answered["bash"] = true
			return "y\n"
		case strings.Contains(o, "result of custom tool lookup") && !answered["lookup"]:
			answered["lookup"] = true
			return "forty-two\n"
		}
		return ""
	}, "sessions", "run", "--agent", agent, "@tool bash {\"command\":\"true\"}\n@tool lookup {\"q\":\"answer\"}")
	if err != nil {
		t.Fatalf("run: %v\n%q", err, out)
	}
	for _, want := range []string{
		"\x1b[33m→ bash", // needs approval: yellow
		`allow bash {"command":"true"}? [y/N]`,
		"✓ approved bash",
		"← lookup: forty-two",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
}

func TestSessionsRunOnTerminalNoColor(t *testing.T) {
	s := startServer(t)
	t.Setenv("NO_COLOR", "1")
	out, err := runOnTerminal(t, s, func(string) string { return "" },
		"sessions", "run", "--agent", s.agentID, "@sleep 800ms\n@text done")
	if err != nil {
		t.Fatalf("run: %v\n%q", err, out)
	}
	if !strings.Contains(out, "working…") {
		t.Errorf("no spinner on a terminal:\n%q", out)
	}
	if !strings.Contains(out, "\r\x1b[Kdone") {
		t.Errorf("the spinner was not cleared before the reply:\n%q", out)
	}
	if regexp.MustCompile(`\x1b\[[0-9;]*m`).MatchString(out) {
		t.Errorf("colour despite NO_COLOR:\n%q", out)
	}
}
