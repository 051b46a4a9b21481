package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// redactedMessage is a user.message of a text block and a redacted block.
func redactedMessage(s string) *anthropic.BetaManagedAgentsUserMessageEventParams {
	return &anthropic.BetaManagedAgentsUserMessageEventParams{Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{
		{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: s}},
		{OfRedacted: &anthropic.BetaManagedAgentsRedactedBlockParam{}},
	}}
}

// TestRedactedBlock: a redacted block sent back through the official SDK
// in a session's initial events, a sent user.message and a deployment's
// initial events is accepted, stored and echoed unchanged; the model reads
// it as the text "[redacted]" (the scripted model echoes the latest user
// text); a model response with withheld content is an agent.message with
// a redacted block; an unknown block type is still a 400 naming it.
func TestRedactedBlock(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "cloud")
	sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID,
		InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: redactedMessage("first")}}})
	if err != nil {
		t.Fatal(err)
	}
	s.waitIdles(t, sess.ID, 1)
	s.send(t, sess.ID, userMessage("@text withheld next\n@redacted"))
	evs := s.waitIdles(t, sess.ID, 2)
	var users, agents []string
	for _, ev := range evs {
		switch ev.Type {
		case "user.message":
			c := ev.AsUserMessage().Content
			users = append(users, c[len(c)-1].Type+" "+c[len(c)-1].RawJSON())
		case "agent.message":
			var parts []string
			for _, c := range ev.AsAgentMessage().Content {
				parts = append(parts, c.Type+":"+c.Text)
			}
			agents = append(agents, strings.Join(parts, ","))
		}
	}
	wantUsers := []string{`redacted {"type":"redacted"}`, `text {"type":"text","text":"@text withheld next\n@redacted"}`}
	wantAgents := []string{"text:You said: [redacted]", "text:withheld next,redacted:"}
	if strings.Join(users, "|") != strings.Join(wantUsers, "|") || strings.Join(agents, "|") != strings.Join(wantAgents, "|") {
		t.Fatalf("user blocks %q, agent messages %q", users, agents)
	}

	p := deploymentParams(a.ID, env.ID, "x", nil)
	p.InitialEvents = []anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{{OfUserMessage: redactedMessage("deployed")}}
	d, err := s.client.Beta.Deployments.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.client.Beta.Deployments.Get(ctx, d.ID, anthropic.BetaDeploymentGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.InitialEvents[0].AsUserMessage().Content; len(c) != 2 || c[1].AsAny() == nil || c[1].RawJSON() != `{"type":"redacted"}` {
		t.Fatalf("deployment initial event %s", got.InitialEvents[0].RawJSON())
	}

	out := s.post(http.DefaultClient, "/v1/sessions/"+sess.ID+"/events",
		[]byte(`{"events":[{"type":"user.message","content":[{"type":"redaction"}]}]}`))
	if out.err != nil || out.status != http.StatusBadRequest || !strings.Contains(out.body, `got \"redaction\"`) {
		t.Fatalf("unknown block type: %d %s %v", out.status, out.body, out.err)
	}
}

// waitIdles waits until a session's event list holds n
// session.status_idle events, and returns the list.
func (s *server) waitIdles(t *testing.T, sessionID string, n int) []anthropic.BetaManagedAgentsSessionEventUnion {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, err := s.client.Beta.Sessions.Events.List(context.Background(), sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
		if err != nil {
			t.Fatal(err)
		}
		idles := 0
		for _, ev := range evs.Data {
			if ev.Type == "session.status_idle" {
				idles++
			}
		}
		if idles >= n {
			return evs.Data
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle events after 30s, want %d", idles, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
