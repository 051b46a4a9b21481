package cli

import (
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// pullWorker creates a self-hosted environment served by the official SDK
// environment worker (in process) and returns the environment's id.
func pullWorker(t *testing.T, s *testServer, name string) string {
	t.Helper()
	r := s.run(t, "environments", "create", "--name", name, "--type", "self_hosted", "-o", "json").must(t)
	envID, _ := jsonField(t, r.stdout, "id").(string)
	r = s.run(t, "environments", "keys", "create", envID).must(t)
	k := struct{ Key string }{strings.TrimSpace(r.stdout)}
	if !strings.HasPrefix(r.stderr, "created ") || k.Key == "" {
		t.Fatalf("environments keys create: %q %q", r.stdout, r.stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	idle := 30 * time.Second
	w := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(s.url), option.WithMaxRetries(0)),
		environments.EnvironmentWorkerOptions{EnvironmentID: envID, EnvironmentKey: k.Key, Workdir: t.TempDir(), MaxIdle: &idle,
			Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return envID
}

// waitWorkActive waits until a pull worker acknowledged the session's work.
func waitWorkActive(t *testing.T, s *testServer, envID, sessionID string) {
	t.Helper()
	active := regexp.MustCompile(`(?m)^\S+ +` + sessionID + ` +active `)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := s.run(t, "environments", "work", envID).must(t)
		if active.MatchString(r.stdout) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no pull worker took the session's work")
}

// TestSessionsRunOnPullWorkerSession: `sessions run` on a terminal follows
// a session whose tools a pull worker runs: it neither asks nor stops for
// those calls, shows the worker's results, and --auto-approve confirms an
// always_ask call once, leaving the result to the worker. tail shows the
// worker's results too.
func TestSessionsRunOnPullWorkerSession(t *testing.T) {
	s := startServer(t)
	for _, policy := range []string{"always_allow", "always_ask"} {
		envID := pullWorker(t, s, "pull-"+policy)
		r := s.run(t, "agents", "create", "--name", "pull-"+policy, "--model", "scripted", "--toolset", policy).must(t)
		agent := regexp.MustCompile(`agent_\w+`).FindString(r.stdout)
		r = s.run(t, "sessions", "create", "--agent", agent, "--environment", envID, "-o", "json").must(t)
		sess, _ := jsonField(t, r.stdout, "id").(string)
		waitWorkActive(t, s, envID, sess)

		args := []string{"sessions", "run", "--session", sess, `@tool bash {"command":"echo from-the-worker > out.txt && cat out.txt"}` + "\n@then the worker answered"}
		if policy == "always_ask" {
			args = append(args, "--auto-approve")
		}
		out, err := runOnTerminal(t, s, func(o string) string { return "" }, args...)
		if err != nil {
			t.Fatalf("%s: run: %v\n%s", policy, err, out)
		}
		for _, want := range []string{"→ bash", `echo from-the-worker > out.txt`, "← bash: from-the-worker", "the worker answered"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", policy, want, out)
			}
		}
		if strings.Contains(out, `\u003e`) || strings.Contains(out, "allow bash") {
			t.Errorf("%s: output:\n%s", policy, out)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		tr := s.runCtx(t, ctx, "sessions", "tail", sess, "--history", "--until-idle")
		cancel()
		tr.must(t)
		assertContains(t, tr.stdout, "← bash: from-the-worker", "the worker answered")
	}
}

// TestTailUntilIdleOnIdleSession: tail --history --until-idle of a session
// that is idle shows its history and ends at once, with the status of its
// last turn.
func TestTailUntilIdleOnIdleSession(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "sessions", "run", "--agent", s.agentID, "@text all done").must(t)
	sess := regexp.MustCompile(`sesn_\w+`).FindString(r.stderr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	tr := s.runCtx(t, ctx, "sessions", "tail", sess, "--history", "--until-idle")
	if ctx.Err() != nil {
		t.Fatalf("tail --until-idle on an idle session did not end (%s)", time.Since(start))
	}
	tr.must(t)
	assertContains(t, tr.stdout, "› @text all done", "all done")

	r = s.run(t, "sessions", "run", "--agent", s.agentID, "@fail billing")
	sess = regexp.MustCompile(`sesn_\w+`).FindString(r.stderr)
	tr = s.runCtx(t, ctx, "sessions", "tail", sess, "--history", "--until-idle")
	if ctx.Err() != nil || tr.code() != 1 {
		t.Fatalf("tail of an abandoned turn: exit %d (%v)", tr.code(), tr.err)
	}
}

// TestThinkingBeforeTextOnTerminal: the thinking line comes before the
// answer it leads to, not after it.
func TestThinkingBeforeTextOnTerminal(t *testing.T) {
	s := startServer(t)
	out, err := runOnTerminal(t, s, func(string) string { return "" },
		"sessions", "run", "--agent", s.agentID, "@think\n@pace 40ms\n@text the considered answer")
	if err != nil {
		t.Fatalf("run: %v\n%q", err, out)
	}
	think, answer := strings.Index(out, "thinking"), strings.Index(out, "the considered answer")
	if think < 0 || answer < 0 || think > answer {
		t.Errorf("thinking at %d, answer at %d:\n%q", think, answer, out)
	}
	if strings.Count(out, "thinking") != 1 {
		t.Errorf("thinking shown %d times:\n%q", strings.Count(out, "thinking"), out)
	}
}

// TestRunSurvivesServerRestart: the server is killed mid-turn; the client
// reconnects when it is back, catches up and ends with the turn.
func TestRunSurvivesServerRestart(t *testing.T) {
	bin := reinsDir(t)
	env := reinsEnv(t, bin, "HOME="+t.TempDir())
	dataDir := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	srv := startServe(t, env, addr, dataDir)
	agent := srv.waitFor(`agent +(agent_\w+)`, 10*time.Second)[1]
	client := startOnTerminal(t, env, "reins", "sessions", "run", "--url", srv.url, "--data-dir", dataDir, "--agent", agent,
		"@sleep 3s\n@text survived the crash")
	client.waitFor(`session sesn_`, 30*time.Second)
	time.Sleep(time.Second) // the turn is under way
	srv.kill()
	client.waitFor(`reconnecting`, 20*time.Second)
	time.Sleep(500 * time.Millisecond)
	srv2 := startServe(t, env, addr, dataDir)
	defer srv2.stop()
	if code := client.wait(90 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, client.output())
	}
	out := client.output()
	for _, want := range []string{"reconnected", "survived the crash"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestChatThreeTurnsWithInterrupt: `reins chat` on a terminal: three
// turns in one session, the second interrupted with Ctrl-C, then Ctrl-D
// leaves; a second Ctrl-C leaves (130 while the interrupted turn ends).
func TestChatThreeTurnsWithInterrupt(t *testing.T) {
	bin := reinsDir(t)
	env := reinsEnv(t, bin, "HOME="+t.TempDir())
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServe(t, env, freePort(t), dataDir)
	defer srv.stop()
	agent := srv.waitFor(`agent +(agent_\w+)`, 10*time.Second)[1]
	chat := startOnTerminal(t, env, "reins", "chat", "--url", srv.url, "--data-dir", dataDir, "--agent", agent)
	chat.waitFor(`session (sesn_\w+)`, 30*time.Second)
	chat.waitFor(`› $`, 10*time.Second)
	chat.typeText("@text first answer\r")
	chat.waitFor(`first answer\r?\n(?s:.*)› $`, 30*time.Second)
	chat.typeText("@sleep 30s\n")
	chat.typeText("\r")
	time.Sleep(1500 * time.Millisecond)
	chat.typeText("\x03")
	chat.waitFor(`interrupted(?s:.*)› $`, 30*time.Second)
	chat.typeText("@text third answer\r")
	chat.waitFor(`third answer\r?\n(?s:.*)› $`, 30*time.Second)
	chat.typeText("\x04")
	if code := chat.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after Ctrl-D:\n%s", code, chat.output())
	}
	sess := regexp.MustCompile(`sesn_\w+`).FindString(chat.output())
	r := execute(context.Background(), "", "sessions", "events", sess, "--url", srv.url, "--api-key", srv.key).must(t)
	if n := strings.Count(r.stdout, "user.message"); n != 3 {
		t.Errorf("%d user messages in the session, want 3:\n%s", n, r.stdout)
	}
	assertContains(t, r.stdout, "user.interrupt", "first answer", "third answer")

	// Ctrl-C twice during a turn leaves.
	chat = startOnTerminal(t, env, "reins", "chat", "--url", srv.url, "--data-dir", dataDir, "--session", sess)
	chat.waitFor(`› $`, 30*time.Second)
	chat.typeText("@sleep 30s\r")
	time.Sleep(1500 * time.Millisecond)
	chat.typeText("\x03")
	chat.waitFor(`Ctrl-C again leaves`, 10*time.Second)
	chat.typeText("\x03")
	// Either the interrupted turn was still ending (130) or it had ended
	// and the second Ctrl-C came at the prompt (0): both leave.
	code := chat.wait(30 * time.Second)
	atPrompt := regexp.MustCompile(`Ctrl-C again leaves(?s:.*)› `).MatchString(chat.output())
	if code != exitInterrupted && !(code == 0 && atPrompt) {
		t.Fatalf("exit %d after two Ctrl-C:\n%s", code, chat.output())
	}
}

// TestEnvironmentKeysOverAPI: environment keys are listed and revoked over
// the API, and a revoked key no longer polls the work queue.
func TestEnvironmentKeysOverAPI(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "environments", "create", "--name", "hosted", "--type", "self_hosted", "-o", "json").must(t)
	envID, _ := jsonField(t, r.stdout, "id").(string)
	r = s.run(t, "environments", "keys", "create", envID).must(t)
	key := strings.TrimSpace(r.stdout)
	id := regexp.MustCompile(`\S+_\w+`).FindString(strings.TrimPrefix(r.stderr, "created "))
	r = s.run(t, "environments", "keys", "list", envID).must(t)
	assertContains(t, r.stdout, id, "…"+key[len(key)-4:])
	if strings.Contains(r.stdout, key) {
		t.Errorf("the key was listed:\n%s", r.stdout)
	}
	s.run(t, "environments", "keys", "revoke", envID, id).must(t)
	r = s.run(t, "environments", "keys", "list", envID).must(t)
	if !regexp.MustCompile(id + `.*\d{4}-\d\d-\d\d.*\d{4}-\d\d-\d\d`).MatchString(r.stdout) {
		t.Errorf("the revoked key is not shown revoked:\n%s", r.stdout)
	}
	if r := s.run(t, "environments", "keys", "create", s.envID); r.err == nil || !strings.Contains(r.err.Error(), "HTTP 400") {
		t.Errorf("a key for a cloud environment: %v", r.err)
	}
}
