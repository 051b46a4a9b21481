package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/deployments"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	ma "github.com/reinsdev/reins/managedagents"
)

// nopRunner runs no session.
type nopRunner struct{}

func (nopRunner) Wake(string)              {}
func (nopRunner) Interrupt(string, string) {}

// launchFixture is a server on a real SQLite store, called over HTTP
// with the bootstrap (admin) key.
type launchFixture struct {
	st  *sqlite.Store
	srv *Server
	url string
}

func newLaunchFixture(t *testing.T) *launchFixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := sessions.New(sessions.Config{Store: st, Runner: nopRunner{}})
	srv := New(Config{Store: st, Auth: &Authenticator{Keys: st, Bootstrap: "sk-test"}, Sessions: svc})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &launchFixture{st: st, srv: srv, url: hs.URL}
}

// do sends a JSON request (in workspace ws, if set) and returns the
// decoded answer's id, failing the test unless it is a 200.
func (f *launchFixture) do(t *testing.T, ws, method, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	req.Header.Set("x-api-key", "sk-test")
	req.Header.Set("Content-Type", "application/json")
	if ws != "" {
		req.Header.Set(WorkspaceHeader, ws)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// deployment creates an agent (with the extra JSON fields agent), an
// environment (with config env) and a deployment of them in ws, and
// returns the stored deployment.
func (f *launchFixture) deployment(t *testing.T, ws, agent, env string) store.Deployment {
	t.Helper()
	a := f.do(t, ws, "POST", "/v1/agents", `{"name":"`+ids.New(ids.Agent)+`","model":"claude-sonnet-4-5"`+agent+`}`)
	e := f.do(t, ws, "POST", "/v1/environments", `{"name":"`+ids.New(ids.Environment)+`","config":`+env+`}`)
	d := f.do(t, ws, "POST", "/v1/deployments", `{"name":"d","agent":"`+a["id"].(string)+`","environment_id":"`+e["id"].(string)+
		`","initial_events":[{"type":"user.message","content":[{"type":"text","text":"hi"}]}],"schedule":{"type":"cron","expression":"* * * * *","timezone":"UTC"}}`)
	got, err := f.st.GetDeployment(context.Background(), d["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// fire fires d's schedule now and returns the run's error type and the
// deployment's pause reason's.
func (f *launchFixture) fire(t *testing.T, d store.Deployment) (runErr, paused string) {
	t.Helper()
	runs := &deployments.Runs{Store: f.st, Launcher: f.srv}
	run, err := runs.Scheduled(context.Background(), d, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if run.Error != nil {
		runErr = run.Error.Type
	}
	d, err = f.st.GetDeployment(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status == ma.DeploymentPaused && d.PausedReason.Error != nil {
		paused = d.PausedReason.Error.Type
	}
	return runErr, paused
}

const cloudEnv = `{"type":"cloud"}`

// TestRunFailsOnDeletedSkill: a skill of the pinned agent version
// deleted fails the fire with skill_not_found_error and pauses it.
func TestRunFailsOnDeletedSkill(t *testing.T) {
	f := newLaunchFixture(t)
	ctx := context.Background()
	content := []byte("PK")
	sk := store.Skill{Skill: ma.Skill{ID: ids.New(ids.Skill), Type: "skill", DisplayName: "PDF", LatestVersionID: "1000",
		Source: ma.SkillSource{Type: "custom"}, CreatedAt: ma.Time(time.Now()), UpdatedAt: ma.Time(time.Now())}, Name: "pdf"}
	v := store.SkillVersion{SkillVersion: ma.SkillVersion{ID: "1000", Type: "skill_version", SkillID: sk.ID, Name: "pdf",
		Description: "Reads PDFs.", CreatedAt: ma.Time(time.Now())}, SizeBytes: 2, SHA256: "b4a2a1a4ee5e6a7e7d0c5cbd3e4d0be9d4cc6cbf0d6e0cfd0e1f1c0ea3d4d7c0"}
	if err := f.st.CreateSkill(store.WithWorkspace(ctx, store.DefaultWorkspace), sk, v, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	d := f.deployment(t, "", `,"skills":[{"type":"custom","skill_id":"`+sk.ID+`"}]`, cloudEnv)
	if err := f.st.DeleteSkillVersion(ctx, sk.ID, "1000"); err != nil {
		t.Fatal(err)
	}
	if err := f.st.DeleteSkill(ctx, sk.ID); err != nil {
		t.Fatal(err)
	}
	if runErr, paused := f.fire(t, d); runErr != "skill_not_found_error" || paused != "skill_not_found_error" {
		t.Fatalf("run error %q, paused with %q; want skill_not_found_error for both", runErr, paused)
	}
}

// TestRunFailsInArchivedWorkspace: a deployment of an archived workspace
// fails its fire with workspace_archived_error and pauses, so that its
// schedule stops.
func TestRunFailsInArchivedWorkspace(t *testing.T) {
	f := newLaunchFixture(t)
	ws := f.do(t, "", "POST", "/v1/organizations/workspaces", `{"name":"team"}`)["id"].(string)
	d := f.deployment(t, ws, "", cloudEnv)
	f.do(t, "", "POST", "/v1/organizations/workspaces/"+ws+"/archive", "")
	if runErr, paused := f.fire(t, d); runErr != "workspace_archived_error" || paused != "workspace_archived_error" {
		t.Fatalf("run error %q, paused with %q; want workspace_archived_error for both", runErr, paused)
	}
	scheduled, err := f.st.ScheduledDeployments(context.Background())
	if err != nil || len(scheduled) != 0 {
		t.Fatalf("scheduled deployments after the failed fire: %d, %v; want none", len(scheduled), err)
	}
}

// TestRunFailsOnBlockedMCP: an MCP server of the agent whose host the
// environment's limited networking does not allow fails the fire with
// mcp_egress_blocked_error and pauses it; allow_mcp_servers, or the host
// in allowed_hosts, lets it through (the rule of the egress proxy).
func TestRunFailsOnBlockedMCP(t *testing.T) {
	f := newLaunchFixture(t)
	agent := `,"mcp_servers":[{"type":"url","name":"docs","url":"https://mcp.example.com/mcp"}],"tools":[{"type":"mcp_toolset","mcp_server_name":"docs"}]`
	limited := func(hosts string, mcp bool) string {
		b, _ := json.Marshal(mcp)
		return `{"type":"cloud","networking":{"type":"limited","allowed_hosts":[` + hosts + `],"allow_mcp_servers":` + string(b) + `}}`
	}
	d := f.deployment(t, "", agent, limited(`"api.example.com"`, false))
	if runErr, paused := f.fire(t, d); runErr != "mcp_egress_blocked_error" || paused != "mcp_egress_blocked_error" {
		t.Fatalf("run error %q, paused with %q; want mcp_egress_blocked_error for both", runErr, paused)
	}
	for _, env := range []string{limited(`"mcp.example.com"`, false), limited(``, true), `{"type":"cloud","networking":{"type":"unrestricted"}}`} {
		d := f.deployment(t, "", agent, env)
		if err := f.srv.checkRunInputs(context.Background(), d); err != nil {
			t.Errorf("environment %s: %v, want the MCP server allowed", env, err)
		}
	}
}

// errCrash is the process dying: a launcher panics with it and the test
// recovers, so that nothing the run would have done after it happens.
var errCrash = errors.New("the process died here")

// crashingLauncher is the server's Launch with the process dying before
// it (before) or after it created the session (after).
type crashingLauncher struct {
	srv           *Server
	before, after bool
}

func (l crashingLauncher) Launch(ctx context.Context, d store.Deployment, runID string) (string, error) {
	if l.before {
		panic(errCrash)
	}
	id, err := l.srv.Launch(ctx, d, runID)
	if l.after {
		panic(errCrash)
	}
	return id, err
}

// fireCrashing fires d through l, the process dying where l says.
func fireCrashing(t *testing.T, st *sqlite.Store, l crashingLauncher, d store.Deployment) {
	t.Helper()
	defer func() {
		if p := recover(); p != errCrash {
			t.Fatalf("the fire did not die: %v", p)
		}
	}()
	(&deployments.Runs{Store: st, Launcher: l}).Scheduled(context.Background(), d, time.Now())
}

// onlyRun returns d's one run.
func onlyRun(t *testing.T, st *sqlite.Store, d store.Deployment) ma.DeploymentRun {
	t.Helper()
	runs, err := st.ListDeploymentRuns(context.Background(), store.DeploymentRunQuery{DeploymentID: d.ID})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %d, %v; want 1", d.ID, len(runs), err)
	}
	return runs[0].Value
}

// sessionsOf returns the ids of the sessions of d.
func sessionsOf(t *testing.T, st *sqlite.Store, d store.Deployment) []string {
	t.Helper()
	items, err := st.ListSessions(context.Background(), store.SessionQuery{DeploymentID: d.ID})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.Value.ID)
	}
	return out
}

// TestRunCutOffByCrash: a fire is exactly-once across a crash. A process
// that dies after the session committed leaves a run that names it (the
// run is finished in the session's transaction); one that dies before
// leaves a pending run, which the next scheduler tick (at start, or on
// another replica) records as an unknown_error, without pausing; and a
// session that would commit after that is refused, so no session exists
// that its run does not name.
func TestRunCutOffByCrash(t *testing.T) {
	f := newLaunchFixture(t)
	ctx := context.Background()

	d := f.deployment(t, "", "", cloudEnv)
	fireCrashing(t, f.st, crashingLauncher{srv: f.srv, after: true}, d)
	run, made := onlyRun(t, f.st, d), sessionsOf(t, f.st, d)
	if len(made) != 1 || run.SessionID == nil || *run.SessionID != made[0] || run.Error != nil {
		t.Fatalf("died after the session: run %+v, sessions %v; want the run naming the one session", run, made)
	}

	d = f.deployment(t, "", "", cloudEnv)
	fireCrashing(t, f.st, crashingLauncher{srv: f.srv, before: true}, d)
	if run := onlyRun(t, f.st, d); run.SessionID != nil || run.Error != nil {
		t.Fatalf("died before the session: run %+v, want it pending", run)
	}
	// The next start's scheduler: a run older than Stale is abandoned.
	s := deployments.NewScheduler(deployments.Config{Runs: &deployments.Runs{Store: f.st, Launcher: f.srv}, Stale: time.Nanosecond})
	s.Tick(ctx)
	run = onlyRun(t, f.st, d)
	if run.SessionID != nil || run.Error == nil || run.Error.Type != deployments.ErrUnknown || run.Error.Message != deployments.Abandoned {
		t.Fatalf("after the restart: run %+v, want an unknown_error", run)
	}
	if got, _ := f.st.GetDeployment(ctx, d.ID); got.Status != ma.DeploymentActive {
		t.Fatalf("an abandoned run paused its deployment: %+v", got.PausedReason)
	}
	// A late session of the abandoned run (its process was only slow) is
	// refused: nothing is created.
	if _, err := f.srv.Launch(store.WithWorkspace(ctx, store.DefaultWorkspace), d, run.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a session for an abandoned run: %v, want a conflict", err)
	}
	if made := sessionsOf(t, f.st, d); len(made) != 0 {
		t.Fatalf("sessions %v of a run that has none", made)
	}
}
