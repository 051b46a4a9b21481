package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestDeploymentsCLI drives `reins deployments` over a real server:
// create with a schedule shows the next runs, run now makes a session,
// runs lists it, pause and unpause change the status, list filters by
// status, archive hides it.
func TestDeploymentsCLI(t *testing.T) {
	s := startServer(t)
	out := s.run(t, "deployments", "create", "--agent", s.agentID, "--environment", s.envID, "--name", "nightly",
		"--message", "hello from a deployment", "--cron", "0 22 * * 1-5", "--timezone", "Europe/Paris").must(t).stdout
	id := regexp.MustCompile(`depl_\w+`).FindString(out)
	if id == "" || !strings.Contains(out, "0 22 * * 1-5 (Europe/Paris)") || !strings.Contains(out, "upcoming runs") {
		t.Fatalf("create printed %q", out)
	}
	run := s.run(t, "deployments", "run", id).must(t).stdout
	if !regexp.MustCompile(`session:\s+sesn_\w+`).MatchString(run) || !strings.Contains(run, "manual") {
		t.Fatalf("run printed %q", run)
	}
	if runs := s.run(t, "deployments", "runs", id).must(t).stdout; !strings.Contains(runs, "manual") || !strings.Contains(runs, "sesn_") {
		t.Fatalf("runs printed %q", runs)
	}
	if p := s.run(t, "deployments", "pause", id).must(t).stdout; !strings.Contains(p, "paused") || !strings.Contains(p, "manual") {
		t.Fatalf("pause printed %q", p)
	}
	if l := s.run(t, "deployments", "list", "--status", "paused").must(t).stdout; !strings.Contains(l, id) {
		t.Fatalf("list --status paused printed %q", l)
	}
	s.run(t, "deployments", "unpause", id).must(t)
	if l := s.run(t, "deployments", "list", "--status", "paused").must(t).stdout; strings.Contains(l, id) {
		t.Fatalf("unpaused, list --status paused printed %q", l)
	}
	s.run(t, "deployments", "archive", id).must(t)
	if l := s.run(t, "deployments", "list").must(t).stdout; strings.Contains(l, id) {
		t.Fatalf("archived, list printed %q", l)
	}
}
