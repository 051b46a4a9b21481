package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/pkgmirror"
	ma "github.com/reinsdev/reins/managedagents"
)

// The packages the mirror serves, and a script that prints something
// from each of them.
const (
	mirrorPyName  = "reinsdemo"
	mirrorNpmName = "reins-demo"
	usePackages   = `python3 -c 'import reinsdemo; print("py", reinsdemo.VALUE)' 2>&1; node -e 'console.log("js", require("reins-demo").value)' 2>&1`
)

// startMirrorServer starts a loopback package mirror and a reins serve
// that installs cloud environments' pip and npm packages from it.
func startMirrorServer(t *testing.T) (*escapeServer, *pkgmirror.Mirror) {
	t.Helper()
	m := pkgmirror.New(t, "", mirrorPyName, mirrorNpmName)
	s := startEscapeServer(t, "--egress-allow", "127.0.0.1/32",
		"--pip-index-url", m.PipIndexURL(), "--npm-registry", m.NpmRegistry())
	return s, m
}

// packagesEnv creates a cloud environment with the given networking and
// packages; it returns the API's status and, on success, the
// environment's id.
func (s *escapeServer) packagesEnv(t *testing.T, networking, packages map[string]any) (string, int, error) {
	t.Helper()
	body := map[string]any{"name": fmt.Sprintf("env-%d", time.Now().UnixNano()),
		"config": map[string]any{"type": "cloud", "networking": networking, "packages": packages}}
	var env ma.Environment
	status, err := call(s.url, s.key, "POST", "/v1/environments", body, &env)
	return env.ID, status, err
}

// TestPackagesFromMirror: with --pip-index-url and --npm-registry set to
// a mirror, a limited environment that allows package managers gets its
// pip and npm packages from the mirror, installed once: both its
// sessions can import them, and the mirror served the wheel and the
// tarball once each.
func TestPackagesFromMirror(t *testing.T) {
	s, m := startMirrorServer(t)
	envID, _, err := s.packagesEnv(t,
		map[string]any{"type": "limited", "allowed_hosts": []string{}, "allow_package_managers": true},
		map[string]any{"type": "packages", "pip": []string{mirrorPyName + "==1.0"}, "npm": []string{mirrorNpmName + "@1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		out := s.bash(t, s.session(t, envID), usePackages)
		if !strings.Contains(out, "py 42") || !strings.Contains(out, "js 42") {
			t.Errorf("session %d cannot use the packages:\n%s\nserver log:\n%s", n, out, s.stderr)
		}
	}
	if wheel, tgz := m.Fetched(); wheel != 1 || tgz != 1 {
		t.Errorf("the mirror served the wheel %d times and the tarball %d times; want once each", wheel, tgz)
	}
}

// TestPackagesRefused: an environment asking for apt packages is refused
// with a 400, and the packages of a limited environment that does not
// allow package managers are not installed: the tool call fails with an
// error that says why, and the mirror is not asked.
func TestPackagesRefused(t *testing.T) {
	s, m := startMirrorServer(t)
	limited := map[string]any{"type": "limited", "allowed_hosts": []string{}, "allow_package_managers": true}
	_, status, err := s.packagesEnv(t, limited, map[string]any{"type": "packages", "apt": []string{"curl"}})
	if status != 400 || err == nil || !strings.Contains(err.Error(), "apt") {
		t.Errorf("an environment with apt packages: status %d, %v; want a 400 that names apt", status, err)
	}

	envID, _, err := s.packagesEnv(t,
		map[string]any{"type": "limited", "allowed_hosts": []string{}, "allow_package_managers": false},
		map[string]any{"type": "packages", "pip": []string{mirrorPyName + "==1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.session(t, envID)
	s.bash(t, sess, usePackages)
	res := s.toolResults(t, sess)
	if len(res) != 1 || res[0].IsError == nil || !*res[0].IsError {
		t.Fatalf("the tool call without allow_package_managers did not fail: %+v", res)
	}
	if text := res[0].Content[0].Text; !strings.Contains(text, "cannot be installed") || !strings.Contains(text, "allow_package_managers") {
		t.Errorf("the error does not say the packages cannot be installed for allow_package_managers: %s", text)
	}
	if wheel, _ := m.Fetched(); wheel != 0 {
		t.Errorf("the mirror served the wheel %d times; want none", wheel)
	}
}

// toolResults returns the session's agent.tool_result events, in order.
func (s *escapeServer) toolResults(t *testing.T, sessionID string) []ma.Event {
	t.Helper()
	var page struct {
		Data []ma.Event `json:"data"`
	}
	if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sessionID+"/events?limit=1000&types[]=agent.tool_result", nil, &page); err != nil {
		t.Fatal(err)
	}
	return page.Data
}
