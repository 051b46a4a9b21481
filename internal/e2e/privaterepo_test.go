package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
)

// TestPrivateRepositoryResource: a github_repository resource with an
// authorization_token is cloned from a git server that demands it; the
// token reaches the server through the sandbox's egress proxy and never
// enters the sandbox (not in its environment, not in the workspace, not
// in the session object); with a wrong one the clone fails clearly; a
// rotated token reaches the running session.
func TestPrivateRepositoryResource(t *testing.T) {
	const token = "ghp_reinsPrivateRepoToken0123456789"
	root := t.TempDir()
	work := filepath.Join(root, "work")
	os.MkdirAll(work, 0o755)
	git(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte("private content\n"), 0o644)
	git(t, work, "add", "README")
	git(t, work, "commit", "-q", "-m", "one")
	git(t, root, "clone", "-q", "--bare", "work", "secret.git")
	var denied atomic.Int64
	base := gitServerWith(t, root, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, pass, ok := r.BasicAuth(); !ok || pass != token {
				denied.Add(1)
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})

	dir := t.TempDir()
	s := startWith(t, options{dir: dir}, func(c *app.Config) {
		c.Sandbox.EgressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		// The test's git server has no TLS: the operator lets the token
		// go to it in clear.
		c.Sandbox.CleartextCredentialHosts = []string{"127.0.0.1"}
	})
	ctx := context.Background()
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	newSession := func(tok string) *anthropic.BetaManagedAgentsSession {
		t.Helper()
		p := &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{URL: base + "/secret.git", AuthorizationToken: tok}
		sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID,
			Resources: []anthropic.BetaSessionNewParamsResourceUnion{{OfGitHubRepository: p}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sess.RawJSON(), token) {
			t.Fatalf("the session object holds the token: %s", sess.RawJSON())
		}
		return sess
	}

	sess := newSession(token)
	// The agent's own fetch authenticates too (the loopback server is
	// reached through the proxy as the clone reaches it: inside the
	// sandbox, no_proxy's 127.0.0.1 is the sandbox's own).
	b64 := base64.StdEncoding.EncodeToString([]byte(token))
	out := s.toolOutput(t, sess.ID, "cat secret/README; NO_PROXY= no_proxy= git -c http.proxy=$HTTP_PROXY -C secret fetch --quiet origin && echo FETCHED; env; cat secret/.git/config; "+
		"grep -rlF \"$(echo "+b64+" | base64 -d)\" /workspace /tmp /mnt 2>/dev/null; echo END")
	if !strings.Contains(out, "private content\nFETCHED\n") || !strings.Contains(out, "REINS_REPOSITORY_TOKEN_") || !strings.HasSuffix(strings.TrimSpace(out), "END") {
		t.Fatalf("bash saw: %q", out)
	}
	if strings.Contains(out, token) || strings.Contains(out, "[redacted credential") || strings.Contains(out, "/workspace/") {
		t.Fatalf("the token reached the sandbox: %q", out)
	}
	got, err := s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil || strings.Contains(got.RawJSON(), token) {
		t.Fatalf("session: %v %s", err, got.RawJSON())
	}

	evs, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
	if err != nil || strings.Contains(evs.RawJSON(), token) {
		t.Fatalf("events: %v", err)
	}
	for _, name := range []string{"reins.db", "reins.db-wal"} {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil && bytes.Contains(data, []byte(token)) {
			t.Fatalf("%s holds the token in clear", name)
		}
	}

	// Rotation: the resource is returned, the token is not.
	rid := sess.Resources[0].ID
	res, err := s.client.Beta.Sessions.Resources.Update(ctx, rid, anthropic.BetaSessionResourceUpdateParams{SessionID: sess.ID, AuthorizationToken: "ghp_rotated"})
	if err != nil || res.ID != rid || strings.Contains(res.RawJSON(), "ghp_rotated") {
		t.Fatalf("rotate: %v %s", err, res.RawJSON())
	}
	_, err = s.client.Beta.Sessions.Resources.Update(ctx, rid, anthropic.BetaSessionResourceUpdateParams{SessionID: sess.ID, AuthorizationToken: "bad token\n"})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")

	// Self-hosted environments have no egress proxy to give the token.
	selfHosted, err := s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "laptop",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: selfHosted.ID,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{{OfGitHubRepository: &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{
			URL: base + "/secret.git", AuthorizationToken: token}}},
	})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")

	// A wrong token: the server refuses the clone; the tool runs without
	// the repository and the session logs a retrying
	// repository_authentication_error naming it.
	denied.Store(0)
	wrong := newSession("ghp_wrong")
	out = s.toolOutput(t, wrong.ID, "ls; echo RAN")
	if strings.Contains(out, "secret") || !strings.Contains(out, "RAN") || denied.Load() == 0 {
		t.Fatalf("clone with a wrong token: %q (%d refusals)", out, denied.Load())
	}
	checkRepositoryError(t, s, wrong.ID, "repository_authentication_error", base+"/secret.git")
	// Rotated to the right one, the running session's next clone works.
	if _, err := s.client.Beta.Sessions.Resources.Update(ctx, wrong.Resources[0].ID, anthropic.BetaSessionResourceUpdateParams{SessionID: wrong.ID, AuthorizationToken: token}); err != nil {
		t.Fatal(err)
	}
	if out := s.toolOutput(t, wrong.ID, "cat secret/README"); strings.TrimSpace(out) != "private content" {
		t.Fatalf("after rotation: %q", out)
	}
}

// checkRepositoryError finds, in a session's events, one retrying
// session.error of type typ naming the repository url.
func checkRepositoryError(t *testing.T, s *server, sessionID, typ, url string) {
	t.Helper()
	evs, err := s.client.Beta.Sessions.Events.List(context.Background(), sessionID, anthropic.BetaSessionEventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Data {
		if ev.Type != "session.error" {
			continue
		}
		e := ev.AsSessionError().Error
		if e.Type == typ && e.RetryStatus.Type == "retrying" && e.RepositoryURL == url {
			return
		}
		t.Errorf("session.error: %s", ev.RawJSON())
	}
	t.Fatalf("no retrying %s naming %s", typ, url)
}
