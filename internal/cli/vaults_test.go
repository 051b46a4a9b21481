package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// runIn executes the CLI against the server with stdin.
func (s *testServer) runIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return execute(context.Background(), stdin, append(args, "--url", s.url, "--api-key", s.key)...)
}

// TestVaultsAndCredentials manages a vault and a credential of each type
// over a real server, and checks that no secret ever reaches the output.
func TestVaultsAndCredentials(t *testing.T) {
	s := startServer(t)
	secrets := []string{"bearer-sekrit-4c1e", "access-sekrit-9b2d", "refresh-sekrit-77aa", "client-sekrit-e0f3", "value-sekrit-31d8"}
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var outputs []string
	run := func(stdin string, args ...string) result {
		t.Helper()
		r := s.runIn(t, stdin, args...).must(t)
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}

	r := run("", "vaults", "create", "--name", "github", "--metadata", "team=docs")
	assertContains(t, r.stdout, "name:", "github", "team=docs")
	vlt := regexp.MustCompile(`vlt_\w+`).FindString(r.stdout)
	if vlt == "" {
		t.Fatalf("no vault id in:\n%s", r.stdout)
	}

	r = run("", "vaults", "credentials", "create", vlt, "--type", "static_bearer",
		"--mcp-server-url", "https://mcp.example.com/mcp", "--token-file", file("token", secrets[0]), "--display-name", "bearer")
	assertContains(t, r.stdout, "static_bearer", "https://mcp.example.com/mcp", "bearer")
	bearer := regexp.MustCompile(`vcrd_\w+`).FindString(r.stdout)

	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r = run(secrets[1], "vaults", "credentials", "create", vlt, "--type", "mcp_oauth",
		"--mcp-server-url", "https://oauth.example.com/mcp", "--access-token-file", "-", "--expires-at", expires,
		"--client-id", "cli", "--token-endpoint", "https://auth.example.com/token", "--refresh-token-file", file("refresh", secrets[2]),
		"--token-endpoint-auth", "client_secret_post", "--client-secret-file", file("client", secrets[3]), "-o", "json")
	if got := jsonField(t, r.stdout, "auth").(map[string]any)["type"]; got != "mcp_oauth" {
		t.Errorf("auth.type = %v", got)
	}
	oauth, _ := jsonField(t, r.stdout, "id").(string)

	r = run(secrets[4], "vaults", "credentials", "create", vlt, "--type", "environment_variable",
		"--secret-name", "GITHUB_TOKEN", "--value-file", "-", "--networking", "limited", "--allowed-host", "api.github.com", "--inject", "header,body")
	assertContains(t, r.stdout, "GITHUB_TOKEN", "limited (api.github.com)", "header=true body=true")
	env := regexp.MustCompile(`vcrd_\w+`).FindString(r.stdout)

	r = run("", "vaults", "list")
	assertContains(t, r.stdout, vlt, "github")
	r = run("", "vaults", "get", vlt, "-o", "json")
	if got := jsonField(t, r.stdout, "display_name"); got != "github" {
		t.Errorf("display_name = %v", got)
	}
	r = run("", "vaults", "credentials", "list", vlt)
	assertContains(t, r.stdout, bearer, oauth, env, "static_bearer", "mcp_oauth", "$GITHUB_TOKEN", "https://oauth.example.com/mcp")
	run("", "vaults", "credentials", "list", vlt, "-o", "json")
	r = run("", "vaults", "credentials", "get", vlt, oauth)
	assertContains(t, r.stdout, "client cli at https://auth.example.com/token (client_secret_post)", "expires:")

	r = run("", "vaults", "credentials", "archive", vlt, bearer)
	assertContains(t, r.stdout, "archived:")
	r = run("", "vaults", "credentials", "delete", vlt, env)
	assertContains(t, r.stdout, "deleted "+env)
	if r := s.run(t, "vaults", "credentials", "get", vlt, env); r.err == nil || !strings.Contains(r.err.Error(), "not found") {
		t.Errorf("deleted credential: err = %v", r.err)
	}

	r = run("", "vaults", "archive", vlt)
	assertContains(t, r.stdout, "archived:")
	r = run("", "vaults", "delete", vlt)
	assertContains(t, r.stdout, "deleted "+vlt)
	if r := s.run(t, "vaults", "get", vlt); r.err == nil {
		t.Errorf("deleted vault still found")
	}

	all := strings.Join(outputs, "\n")
	for _, sec := range secrets {
		if strings.Contains(all, sec) {
			t.Errorf("the secret %q appears in the CLI's output", sec)
		}
	}
}

// TestCredentialsCreateRefusesUnknownType: an unknown --type is refused,
// naming the accepted values, before any request or secret read.
func TestCredentialsCreateRefusesUnknownType(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	r := execute(context.Background(), "sekrit", "vaults", "credentials", "create", "vlt_x", "--type", "basic_auth",
		"--token-file", "-", "--url", srv.URL, "--api-key", "k")
	if r.err == nil {
		t.Fatal("unknown --type accepted")
	}
	assertContains(t, r.err.Error(), `--type: want one of static_bearer, mcp_oauth, environment_variable, got "basic_auth"`)
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests made", n)
	}

	r = execute(context.Background(), "", "vaults", "credentials", "create", "vlt_x", "--type", "static_bearer",
		"--secret-name", "X", "--url", srv.URL, "--api-key", "k")
	if r.err == nil || !strings.Contains(r.err.Error(), "--secret-name does not apply to static_bearer credentials") {
		t.Errorf("a flag of another type: err = %v", r.err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests made", n)
	}
}
