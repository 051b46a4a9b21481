package cli

import (
	"regexp"
	"testing"
)

func TestEnvironmentsWork(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "environments", "create", "--name", "laptop", "--type", "self_hosted").must(t)
	env := regexp.MustCompile(`env_\w+`).FindString(r.stdout)
	r = s.run(t, "sessions", "create", "--agent", s.agentID, "--environment", env).must(t)
	sess := regexp.MustCompile(`sesn_\w+`).FindString(r.stdout)

	r = s.run(t, "environments", "work", env).must(t)
	assertContains(t, r.stdout, "queued 1", "workers polling 0", sess, "queued")

	r = s.run(t, "environments", "work", s.envID)
	if r.err == nil {
		t.Fatalf("a cloud environment has no work queue, got:\n%s", r.stdout)
	}
	assertContains(t, r.err.Error(), "self_hosted")
}
