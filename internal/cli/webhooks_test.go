package cli

import (
	"regexp"
	"testing"
)

func TestWebhooksCRUD(t *testing.T) {
	s := startServer(t)
	r := s.run(t, "webhooks", "create", "https://hooks.example.com/reins", "--event", "session.created", "--event", "session.deleted", "--name", "ci").must(t)
	assertContains(t, r.stdout, "https://hooks.example.com/reins", "session.created,session.deleted", "enabled", "whsec_", "shown once")
	id := regexp.MustCompile(`whep_\w+`).FindString(r.stdout)
	if id == "" {
		t.Fatalf("no endpoint id in:\n%s", r.stdout)
	}
	r = s.run(t, "webhooks", "list").must(t)
	assertContains(t, r.stdout, "ID", "STATE", id, "session.created,session.deleted")
	r = s.run(t, "webhooks", "update", id, "--state", "disabled", "--event", "agent.created").must(t)
	assertContains(t, r.stdout, "disabled", "agent.created")
	r = s.run(t, "webhooks", "get", id, "-o", "json").must(t)
	if got := jsonField(t, r.stdout, "name"); got != "ci" {
		t.Errorf("json name = %v", got)
	}
	r = s.run(t, "webhooks", "rotate-secret", id).must(t)
	assertContains(t, r.stdout, "signing_secret", "whsec_")
	if r := s.run(t, "webhooks", "create", "https://x.example.com", "--event", "session.exploded"); r.err == nil {
		t.Error("an unknown event type was accepted")
	}
	s.run(t, "webhooks", "delete", id).must(t)
	if r := s.run(t, "webhooks", "get", id); r.err == nil {
		t.Error("get after delete succeeded")
	}
}
