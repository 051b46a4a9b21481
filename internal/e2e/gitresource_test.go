package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
)

// gitServer serves the bare repositories under a directory over smart
// HTTP with git http-backend, on loopback.
func gitServer(t *testing.T, root string) string {
	t.Helper()
	return gitServerWith(t, root, func(h http.Handler) http.Handler { return h })
}

// gitServerWith is gitServer with its handler wrapped (in authentication).
func gitServerWith(t *testing.T, root string, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git is required for this test (.ci/run installs it): %v", err)
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: wrap(h)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestGitRepositoryResource: a github_repository resource is cloned from
// a git server on loopback into the session's workspace, at the commit
// given, through the sandbox's egress proxy; a branch checkout gets the
// branch's head; bad URLs and checkouts are refused.
func TestGitRepositoryResource(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	os.MkdirAll(work, 0o755)
	git(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte("first version\n"), 0o644)
	git(t, work, "add", "README")
	git(t, work, "commit", "-q", "-m", "one")
	first := git(t, work, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(work, "README"), []byte("second version\n"), 0o644)
	git(t, work, "commit", "-q", "-am", "two")
	git(t, root, "clone", "-q", "--bare", "work", "project.git")
	base := gitServer(t, root)

	s := startWith(t, options{}, func(c *app.Config) {
		c.Sandbox.EgressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	ctx := context.Background()
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	repo := func(url string, checkout anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion, mount string) anthropic.BetaSessionNewParamsResourceUnion {
		p := &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{URL: url, Checkout: checkout}
		if mount != "" {
			p.MountPath = anthropic.String(mount)
		}
		return anthropic.BetaSessionNewParamsResourceUnion{OfGitHubRepository: p}
	}
	newSession := func(res ...anthropic.BetaSessionNewParamsResourceUnion) (*anthropic.BetaManagedAgentsSession, error) {
		return s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID, Resources: res,
		})
	}
	commit := anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion{OfCommit: &anthropic.BetaManagedAgentsCommitCheckoutParam{Sha: first}}
	branch := anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion{OfBranch: &anthropic.BetaManagedAgentsBranchCheckoutParam{Name: "main"}}

	for _, bad := range []anthropic.BetaSessionNewParamsResourceUnion{
		repo("file:///etc", commit, ""),
		repo("http://user:secret@127.0.0.1/x.git", commit, ""),
		repo(base+"/project.git", anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion{OfCommit: &anthropic.BetaManagedAgentsCommitCheckoutParam{Sha: "--upload-pack=x"}}, ""),
		repo(base+"/project.git", anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion{OfBranch: &anthropic.BetaManagedAgentsBranchCheckoutParam{Name: "-x"}}, ""),
		repo(base+"/project.git", commit, "/tmp/x"),
	} {
		_, err := newSession(bad)
		apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	}

	sess, err := newSession(repo(base+"/project.git", commit, ""), repo(base+"/project.git", branch, "/workspace/latest"))
	if err != nil {
		t.Fatal(err)
	}
	if sess.Resources[0].MountPath != "/workspace/project" || sess.Resources[0].Checkout.Sha != first {
		t.Fatalf("resources %s", sess.RawJSON())
	}
	out := s.toolOutput(t, sess.ID, "cat project/README; git -C project rev-parse HEAD; cat latest/README")
	if !strings.Contains(out, "first version\n"+first+"\nsecond version") {
		t.Fatalf("bash saw: %q", out)
	}
}

// TestRepositoryErrors: a github_repository resource that cannot be
// cloned does not stop the session: the tool runs without it and the
// session logs a retrying repository_*_error naming the repository, one
// type per cause (forbidden, not found, a missing branch, a clone that
// fails otherwise; authentication is TestPrivateRepositoryResource's).
func TestRepositoryErrors(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	os.MkdirAll(work, 0o755)
	git(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte("content\n"), 0o644)
	git(t, work, "add", "README")
	git(t, work, "commit", "-q", "-m", "one")
	git(t, root, "clone", "-q", "--bare", "work", "project.git")
	base := gitServerWith(t, root, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasPrefix(r.URL.Path, "/forbidden.git"):
				http.Error(w, "no access", http.StatusForbidden)
			case strings.HasPrefix(r.URL.Path, "/broken.git"):
				http.Error(w, "the server broke", http.StatusInternalServerError)
			default:
				h.ServeHTTP(w, r)
			}
		})
	})
	s := startWith(t, options{}, func(c *app.Config) {
		c.Sandbox.EgressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	ctx := context.Background()
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	for _, c := range []struct {
		path, branch, typ string
	}{
		{"/forbidden.git", "", "repository_forbidden_error"},
		{"/missing.git", "", "repository_not_found_error"},
		{"/project.git", "no-such-branch", "repository_checkout_error"},
		{"/broken.git", "", "repository_clone_error"},
	} {
		p := &anthropic.BetaManagedAgentsGitHubRepositoryResourceParams{URL: base + c.path, MountPath: anthropic.String("/workspace/repo")}
		if c.branch != "" {
			p.Checkout = anthropic.BetaManagedAgentsGitHubRepositoryResourceParamsCheckoutUnion{OfBranch: &anthropic.BetaManagedAgentsBranchCheckoutParam{Name: c.branch}}
		}
		sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: env.ID,
			Resources: []anthropic.BetaSessionNewParamsResourceUnion{{OfGitHubRepository: p}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if out := s.toolOutput(t, sess.ID, "ls; echo RAN"); strings.Contains(out, "repo") || !strings.Contains(out, "RAN") {
			t.Fatalf("%s: bash saw %q", c.path, out)
		}
		checkRepositoryError(t, s, sess.ID, c.typ, base+c.path)
	}
}
