package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/pgtest"
)

// testClock is the deployments scheduler's clock in these tests: real
// time shifted forward, so that a "* * * * *" schedule fires in a second
// or two instead of up to a minute.
type testClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

// beforeMinute moves the clock forward to lead before its next whole
// minute, and returns that minute.
func (c *testClock) beforeMinute(lead time.Duration) time.Time {
	now := c.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	if next.Sub(now) < lead {
		next = next.Add(time.Minute)
	}
	c.mu.Lock()
	c.off += next.Add(-lead).Sub(now)
	c.mu.Unlock()
	return next
}

// withClock makes the server's scheduler read c and poll often.
func withClock(c *testClock, dsn string) func(*app.Config) {
	return func(cfg *app.Config) {
		cfg.DeploymentClock, cfg.DeploymentPoll = c.Now, 300*time.Millisecond
		cfg.DatabaseURL = dsn
	}
}

// everyMinute is a schedule of every minute in UTC.
func everyMinute() anthropic.BetaManagedAgentsScheduleParams {
	return anthropic.BetaManagedAgentsScheduleParams{Expression: "* * * * *", Timezone: "UTC"}
}

// deploymentParams is a deployment of agentID in envID that says msg.
func deploymentParams(agentID, envID, msg string, sched *anthropic.BetaManagedAgentsScheduleParams) anthropic.BetaDeploymentNewParams {
	p := anthropic.BetaDeploymentNewParams{Agent: anthropic.BetaDeploymentNewParamsAgentUnion{OfString: anthropic.String(agentID)},
		EnvironmentID: envID, Name: "nightly",
		InitialEvents: []anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{
			{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: text(msg)}}}}
	if sched != nil {
		p.Schedule = *sched
	}
	return p
}

// runsOf lists a deployment's runs, newest first.
func (s *server) runsOf(t *testing.T, deploymentID string, trigger string) []anthropic.BetaManagedAgentsDeploymentRun {
	t.Helper()
	p := anthropic.BetaDeploymentRunListParams{DeploymentID: anthropic.String(deploymentID)}
	if trigger != "" {
		p.TriggerType = anthropic.BetaManagedAgentsTriggerType(trigger)
	}
	page, err := s.client.Beta.DeploymentRuns.List(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return page.Data
}

// waitRuns waits until the deployment has n scheduled runs.
func (s *server) waitRuns(t *testing.T, deploymentID string, n int) []anthropic.BetaManagedAgentsDeploymentRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs := s.runsOf(t, deploymentID, "schedule")
		done := len(runs) >= n
		for _, r := range runs {
			done = done && (r.SessionID != "" || r.Error.Type != "")
		}
		if done || time.Now().After(deadline) {
			if len(runs) != n {
				t.Fatalf("deployment %s has %d scheduled runs, want %d", deploymentID, len(runs), n)
			}
			return runs
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReply waits until the session has answered want.
func (s *server) waitReply(t *testing.T, sessionID, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		page, err := s.client.Beta.Sessions.Events.List(context.Background(), sessionID, anthropic.BetaSessionEventListParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Data {
			if ev.Type == "agent.message" && strings.Contains(ev.RawJSON(), want) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("session %s never answered %q", sessionID, want)
}

// TestDeploymentSchedule: a deployment's cron schedule fires at its
// instant and the run's session runs its initial events; a pause stops
// the fires (the schedule still shows what comes), a manual run works
// while paused and leaves last_run_at; the sessions list filters by
// deployment; archiving the environment makes the next fire fail and
// pause the deployment with environment_archived_error.
func TestDeploymentSchedule(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	s := startWith(t, options{}, withClock(clock, ""))
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "deployments")
	sched := everyMinute()
	at := clock.beforeMinute(1500 * time.Millisecond)
	d, err := s.client.Beta.Deployments.New(ctx, deploymentParams(a.ID, env.ID, "good morning", &sched))
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != "active" || d.Agent.ID != a.ID || d.Agent.Version != a.Version || len(d.Schedule.UpcomingRunsAt) != 5 ||
		!d.Schedule.UpcomingRunsAt[0].Equal(at) || d.JSON.PausedReason.Raw() != "null" || !d.Schedule.LastRunAt.IsZero() {
		t.Fatalf("created %s", d.RawJSON())
	}
	runs := s.waitRuns(t, d.ID, 1)
	r := runs[0]
	if r.TriggerContext.Type != "schedule" || !r.TriggerContext.ScheduledAt.Equal(at) || r.SessionID == "" || r.JSON.Error.Raw() != "null" ||
		r.Agent.ID != a.ID || r.Agent.Version != a.Version || !strings.HasPrefix(r.ID, "drun_") {
		t.Fatalf("run %s", r.RawJSON())
	}
	s.waitReply(t, r.SessionID, "good morning")
	sess, err := s.client.Beta.Sessions.Get(ctx, r.SessionID, anthropic.BetaSessionGetParams{})
	if err != nil || sess.DeploymentID != d.ID {
		t.Fatalf("the run's session: %v, deployment_id %q", err, sess.DeploymentID)
	}
	got, err := s.client.Beta.Deployments.Get(ctx, d.ID, anthropic.BetaDeploymentGetParams{})
	if err != nil || !got.Schedule.LastRunAt.Equal(at) {
		t.Fatalf("after the fire: %v %s", err, got.RawJSON())
	}

	// Paused: the next instant passes without a fire; a manual run works.
	paused, err := s.client.Beta.Deployments.Pause(ctx, d.ID, anthropic.BetaDeploymentPauseParams{})
	if err != nil || paused.Status != "paused" || paused.PausedReason.Type != "manual" || len(paused.Schedule.UpcomingRunsAt) != 5 {
		t.Fatalf("pause: %v %s", err, paused.RawJSON())
	}
	clock.beforeMinute(time.Second)
	time.Sleep(3 * time.Second)
	if runs := s.runsOf(t, d.ID, "schedule"); len(runs) != 1 {
		t.Fatalf("%d scheduled runs after a paused instant, want 1", len(runs))
	}
	manual, err := s.client.Beta.Deployments.Run(ctx, d.ID, anthropic.BetaDeploymentRunParams{})
	if err != nil || manual.TriggerContext.Type != "manual" || manual.SessionID == "" {
		t.Fatalf("run now: %v %s", err, manual.RawJSON())
	}
	s.waitReply(t, manual.SessionID, "good morning")
	got, _ = s.client.Beta.Deployments.Get(ctx, d.ID, anthropic.BetaDeploymentGetParams{})
	if !got.Schedule.LastRunAt.Equal(at) {
		t.Fatalf("a manual run moved last_run_at: %s", got.RawJSON())
	}
	if other := s.newSession(t, a.ID, env.ID); other.DeploymentID != "" {
		t.Fatalf("a session of no deployment has deployment_id %q", other.DeploymentID)
	}
	list, err := s.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{DeploymentID: anthropic.String(d.ID)})
	if err != nil || len(list.Data) != 2 {
		t.Fatalf("sessions of the deployment: %v, %d, want 2", err, len(list.Data))
	}

	// Unpaused with the environment archived: the next fire fails and
	// pauses the deployment.
	if _, err := s.client.Beta.Deployments.Unpause(ctx, d.ID, anthropic.BetaDeploymentUnpauseParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Beta.Environments.Archive(ctx, env.ID, anthropic.BetaEnvironmentArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	at2 := clock.beforeMinute(time.Second)
	runs = s.waitRuns(t, d.ID, 2)
	if r := runs[0]; r.Error.Type != "environment_archived_error" || r.SessionID != "" || !r.TriggerContext.ScheduledAt.Equal(at2) {
		t.Fatalf("run on an archived environment %s", r.RawJSON())
	}
	got, _ = s.client.Beta.Deployments.Get(ctx, d.ID, anthropic.BetaDeploymentGetParams{})
	if got.Status != "paused" || got.PausedReason.Type != "error" || got.PausedReason.Error.Type != "environment_archived_error" {
		t.Fatalf("after the failed fire: %s", got.RawJSON())
	}
	failed, err := s.client.Beta.DeploymentRuns.List(ctx, anthropic.BetaDeploymentRunListParams{HasError: anthropic.Bool(true)})
	if err != nil || len(failed.Data) != 1 {
		t.Fatalf("runs with an error: %v %d, want 1", err, len(failed.Data))
	}
	archived, err := s.client.Beta.Deployments.Archive(ctx, d.ID, anthropic.BetaDeploymentArchiveParams{})
	if err != nil || archived.ArchivedAt.IsZero() || len(archived.Schedule.UpcomingRunsAt) != 0 || !archived.Schedule.LastRunAt.Equal(at2) {
		t.Fatalf("archive: %v %s", err, archived.RawJSON())
	}
}

// TestDeploymentReplicas: three replicas on one PostgreSQL, all
// scheduling the same deployment, record one run and create one session
// per scheduled instant.
func TestDeploymentReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDB(t)
	clock := &testClock{}
	var rs []*server
	for range 3 {
		rs = append(rs, startWith(t, options{}, withClock(clock, dsn)))
	}
	a := rs[0].newAgent(t, "scripted")
	env := rs[0].newEnv(t, "replicas")
	sched := everyMinute()
	clock.beforeMinute(2 * time.Second)
	d, err := rs[0].client.Beta.Deployments.New(ctx, deploymentParams(a.ID, env.ID, "once", &sched))
	if err != nil {
		t.Fatal(err)
	}
	rs[0].waitRuns(t, d.ID, 1)
	clock.beforeMinute(time.Second)
	runs := rs[1].waitRuns(t, d.ID, 2)
	time.Sleep(time.Second) // a late replica would add a run now
	if again := rs[2].runsOf(t, d.ID, ""); len(again) != 2 || runs[0].TriggerContext.ScheduledAt.Equal(runs[1].TriggerContext.ScheduledAt) {
		t.Fatalf("%d runs for two instants", len(again))
	}
	list, err := rs[2].client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{DeploymentID: anthropic.String(d.ID)})
	if err != nil || len(list.Data) != 2 {
		t.Fatalf("sessions of the deployment: %v, %d, want 2", err, len(list.Data))
	}
}

// TestDeploymentValidation: each rule of a create and the list refuses
// with a 400.
func TestDeploymentValidation(t *testing.T) {
	ctx := context.Background()
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "validation")
	for name, sched := range map[string]anthropic.BetaManagedAgentsScheduleParams{
		"seconds":          {Expression: "0 * * * * *", Timezone: "UTC"},
		"descriptor":       {Expression: "@daily", Timezone: "UTC"},
		"L":                {Expression: "0 0 L * *", Timezone: "UTC"},
		"missing timezone": {Expression: "0 0 * * *"},
		"invalid timezone": {Expression: "0 0 * * *", Timezone: "Mars/Olympus"},
	} {
		_, err := s.client.Beta.Deployments.New(ctx, deploymentParams(a.ID, env.ID, "hi", &sched))
		if status(err) != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", name, err)
		}
	}
	p := deploymentParams(a.ID, env.ID, "hi", nil)
	p.InitialEvents = []anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{}
	if _, err := s.client.Beta.Deployments.New(ctx, p); status(err) != http.StatusBadRequest {
		t.Errorf("empty initial_events: %v, want 400", err)
	}
	_, err := s.client.Beta.Deployments.List(ctx, anthropic.BetaDeploymentListParams{Status: "active", IncludeArchived: anthropic.Bool(true)})
	if status(err) != http.StatusBadRequest {
		t.Errorf("status with include_archived: %v, want 400", err)
	}
	// A system message is an initial event of a deployment.
	p = deploymentParams(a.ID, env.ID, "hi", nil)
	p.InitialEvents = append(p.InitialEvents, anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{OfSystemMessage: &anthropic.BetaManagedAgentsSystemMessageEventParams{
		Content: []anthropic.BetaManagedAgentsSystemContentBlockParam{{Text: "be brief"}}}})
	if d, err := s.client.Beta.Deployments.New(ctx, p); err != nil || len(d.InitialEvents) != 2 || d.JSON.Schedule.Raw() != "null" {
		t.Fatalf("with a system message: %v", err)
	}
	runs, err := s.client.Beta.DeploymentRuns.List(ctx, anthropic.BetaDeploymentRunListParams{DeploymentID: anthropic.String("depl_unknown")})
	if err != nil || len(runs.Data) != 0 {
		t.Fatalf("runs of an unknown deployment: %v", err)
	}
}

// status is the HTTP status of an API error, 0 for another.
func status(err error) int {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

// TestDeploymentMCPEgressBlocked: an agent whose MCP server's host the
// environment's limited networking does not allow (no allow_mcp_servers,
// the host not in allowed_hosts) fails a manual run with
// mcp_egress_blocked_error without pausing, and its scheduled fire with
// the same error, pausing the deployment; allowing MCP servers lets the
// check through.
func TestDeploymentMCPEgressBlocked(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	s := startWith(t, options{}, withClock(clock, ""))
	a, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "with mcp", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "docs", URL: "https://mcp.example.com/mcp"}},
		Tools:      []anthropic.BetaAgentNewParamsToolUnion{{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "docs"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	limited := func(name string, allowMCP bool) string {
		env, err := s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: name,
			Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
				Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{
					AllowedHosts: []string{"api.example.com"}, AllowMCPServers: anthropic.Bool(allowMCP)}},
			}}})
		if err != nil {
			t.Fatal(err)
		}
		return env.ID
	}
	sched := everyMinute()
	clock.beforeMinute(3 * time.Second)
	d, err := s.client.Beta.Deployments.New(ctx, deploymentParams(a.ID, limited("closed", false), "hi", &sched))
	if err != nil {
		t.Fatal(err)
	}
	manual, err := s.client.Beta.Deployments.Run(ctx, d.ID, anthropic.BetaDeploymentRunParams{})
	if err != nil || manual.Error.Type != "mcp_egress_blocked_error" || manual.SessionID != "" || !strings.Contains(manual.Error.Message, "mcp.example.com") {
		t.Fatalf("manual run: %v %s", err, manual.RawJSON())
	}
	if got, _ := s.client.Beta.Deployments.Get(ctx, d.ID, anthropic.BetaDeploymentGetParams{}); got.Status != "active" {
		t.Fatalf("a manual run paused the deployment: %s", got.RawJSON())
	}
	runs := s.waitRuns(t, d.ID, 1)
	if runs[0].Error.Type != "mcp_egress_blocked_error" {
		t.Fatalf("scheduled run %s", runs[0].RawJSON())
	}
	got, _ := s.client.Beta.Deployments.Get(ctx, d.ID, anthropic.BetaDeploymentGetParams{})
	if got.Status != "paused" || got.PausedReason.Type != "error" || got.PausedReason.Error.Type != "mcp_egress_blocked_error" {
		t.Fatalf("after the fire: %s", got.RawJSON())
	}
	// The same agent in an environment that allows MCP servers runs.
	ok, err := s.client.Beta.Deployments.New(ctx, deploymentParams(a.ID, limited("open", true), "hi", nil))
	if err != nil {
		t.Fatal(err)
	}
	if run, err := s.client.Beta.Deployments.Run(ctx, ok.ID, anthropic.BetaDeploymentRunParams{}); err != nil || run.SessionID == "" {
		t.Fatalf("run with allow_mcp_servers: %v %s", err, run.RawJSON())
	}
}
