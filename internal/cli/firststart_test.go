package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestFirstStartHintsOnTerminal starts `reins serve` on a terminal with a
// data dir and port that are not the defaults, and an Anthropic key
// exported as the README's Claude setup has it: the hints name --url and
// --data-dir, and the CLI line they print works as printed.
func TestFirstStartHintsOnTerminal(t *testing.T) {
	bin := reinsDir(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	env := reinsEnv(t, bin, "ANTHROPIC_API_KEY=sk-ant-not-a-reins-key", "HOME="+t.TempDir())
	s := startServe(t, env, addr, dataDir, "--anthropic-base-url", "http://127.0.0.1:1")
	defer s.stop()
	m := s.waitFor(`(?m)^    (reins sessions run [^\r\n]*)\r?$`, 10*time.Second)
	cli := m[1]
	for _, want := range []string{"--url http://" + addr, "--data-dir " + dataDir} {
		if !strings.Contains(cli, want) {
			t.Errorf("hint %q lacks %q", cli, want)
		}
	}
	curl := s.waitFor(`(?m)^    (curl [^\r\n]*)\r?$`, time.Second)[1]
	if !strings.Contains(curl, "$(cat "+filepath.Join(dataDir, "api-key")+")") {
		t.Errorf("curl hint %q does not read the key file", curl)
	}
	if s.key == "" || !strings.Contains(s.output(), s.key) {
		t.Fatalf("the first key was not shown:\n%s", s.output())
	}
	// The hint as printed, in another shell with the same environment.
	// The demo agent uses claude-sonnet-5-5 (an Anthropic key is set),
	// whose upstream here is unreachable: the turn fails, but the CLI
	// reached the server with the right key.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := shell(t, ctx, env, t.TempDir(), strings.Replace(cli, `"Hello"`, `"@text hi"`, 1)+" || true")
	if err != nil || strings.Contains(out, "rejected the API key") || !strings.Contains(out, "session sesn_") {
		t.Fatalf("the hint did not work: %v\n%s", err, out)
	}
	out, err = shell(t, ctx, env, t.TempDir(), curl)
	if err != nil || !strings.Contains(out, `"demo"`) {
		t.Fatalf("the curl hint did not work: %v\n%s", err, out)
	}
}

// TestFirstStartWithBootstrapKey: with REINS_API_KEY and no key file, the
// hints use the variable, not a file that does not exist.
func TestFirstStartWithBootstrapKey(t *testing.T) {
	bin := reinsDir(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	env := reinsEnv(t, bin, "REINS_API_KEY=sk-reins-bootstrap-0123456789", "HOME="+t.TempDir())
	s := startServe(t, env, addr, dataDir)
	defer s.stop()
	s.waitFor(`curl `, 10*time.Second)
	out := s.output()
	if strings.Contains(out, "cat ") || strings.Contains(out, "--data-dir") {
		t.Errorf("hints name a key file that does not exist:\n%s", out)
	}
	if !strings.Contains(out, `"x-api-key: $REINS_API_KEY"`) {
		t.Errorf("curl hint does not use $REINS_API_KEY:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "api-key")); err == nil {
		t.Errorf("a key file was written although REINS_API_KEY was given")
	}
}

// TestFirstStartPortInUse: a first start that cannot listen creates
// nothing, so the next start is still the first one, with key and hints.
func TestFirstStartPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dataDir := filepath.Join(t.TempDir(), "data")
	r := execute(context.Background(), "", "serve", "--addr", ln.Addr().String(), "--data-dir", dataDir, "--sandbox", "none")
	if r.err == nil || !strings.Contains(r.err.Error(), "listen on") {
		t.Fatalf("serve on a busy port: %v", r.err)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("the failed start left %v in the data dir", names)
	}
	bin := reinsDir(t)
	s := startServe(t, reinsEnv(t, bin, "HOME="+t.TempDir()), freePort(t), dataDir)
	defer s.stop()
	s.waitFor(`A demo agent and environment are ready`, 10*time.Second)
	if s.key == "" || !strings.Contains(s.output(), "A first API key was created") {
		t.Errorf("the second start is not a first start:\n%s", s.output())
	}
}

// TestServeRefusesItselfAsAnthropic: ANTHROPIC_BASE_URL pointing at the
// server's own address is refused at start.
func TestServeRefusesItselfAsAnthropic(t *testing.T) {
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	for _, base := range []string{"http://" + addr, "http://localhost:" + port + "/", "http://127.0.0.1:" + port + "/v1"} {
		t.Setenv("ANTHROPIC_BASE_URL", base)
		r := execute(context.Background(), "", "serve", "--addr", addr, "--data-dir", t.TempDir(), "--sandbox", "none")
		if r.err == nil || !strings.Contains(r.err.Error(), "this server itself") || !strings.Contains(r.err.Error(), "ANTHROPIC_BASE_URL") {
			t.Errorf("ANTHROPIC_BASE_URL=%s: %v", base, r.err)
		}
	}
}

// TestServeBadConfiguration: a value a flag does not accept, given on the
// command line or in its environment variable, stops the start with the
// flag's name (and the variable's), instead of a default.
func TestServeBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		env   []string
		args  []string
		wants []string
	}{
		{env: []string{"REINS_MODEL_MAX_ATTEMPTS", "abc"}, wants: []string{"REINS_MODEL_MAX_ATTEMPTS", "--model-max-attempts", `"abc"`}},
		{env: []string{"REINS_MODEL_MAX_ATTEMPTS", "0"}, wants: []string{"REINS_MODEL_MAX_ATTEMPTS", "--model-max-attempts", "at least 1"}},
		{args: []string{"--model-max-attempts", "x"}, wants: []string{"--model-max-attempts"}},
		{args: []string{"--log-level", "verbose"}, wants: []string{"--log-level (REINS_LOG_LEVEL)", "debug, info, warn or error", `"verbose"`}},
		{env: []string{"REINS_LOG_LEVEL", "loud"}, wants: []string{"--log-level (REINS_LOG_LEVEL)", `"loud"`}},
		{env: []string{"REINS_MODEL_RETRY_BASE", "soon"}, wants: []string{"REINS_MODEL_RETRY_BASE", "--model-retry-base"}},
		{env: []string{"REINS_MODEL_RETRY_MAX", "10ms"}, wants: []string{"--model-retry-max (REINS_MODEL_RETRY_MAX)", "--model-retry-base"}},
		{env: []string{"REINS_SHUTDOWN_GRACE", "forever"}, wants: []string{"REINS_SHUTDOWN_GRACE", "--shutdown-grace"}},
		{args: []string{"--shutdown-grace", "-1s"}, wants: []string{"--shutdown-grace (REINS_SHUTDOWN_GRACE)"}},
		{env: []string{"REINS_SANDBOX_PROCESSES", "many"}, wants: []string{"REINS_SANDBOX_PROCESSES", "--sandbox-processes"}},
		{env: []string{"REINS_SANDBOX_CPU", "-1"}, wants: []string{"--sandbox-cpu"}},
		{env: []string{"REINS_SANDBOX", "vm"}, wants: []string{"--sandbox", `"vm"`}},
		{args: []string{"--lease-ttl", "10ms"}, wants: []string{"--lease-ttl (REINS_LEASE_TTL)", "at least 1s"}},
		{env: []string{"REINS_REPLICA_ID", "two words"}, wants: []string{"--replica-id (REINS_REPLICA_ID)", "without spaces"}},
	} {
		dir := t.TempDir()
		if len(tc.env) > 0 {
			t.Setenv(tc.env[0], tc.env[1])
		}
		// A start that is not refused serves until the context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r := execute(ctx, "", append([]string{"serve", "--data-dir", dir, "--addr", freePort(t)}, tc.args...)...)
		cancel()
		if len(tc.env) > 0 {
			os.Unsetenv(tc.env[0])
		}
		if r.err == nil {
			t.Errorf("%v %v: started", tc.env, tc.args)
			continue
		}
		for _, w := range tc.wants {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("%v %v: %q lacks %q", tc.env, tc.args, r.err, w)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v %v: the refused start wrote to the data dir", tc.env, tc.args)
		}
	}
}

// TestServeHelpAndREADMETable: every `reins serve` flag is in the README's
// configuration table with the environment variable it falls back to, and
// the table lists no flag that does not exist.
func TestServeHelpAndREADMETable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| (?:`([A-Z_]+)`|—) \\|")
	table := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		table[m[1]] = m[2]
	}
	cmd := newServeCommand()
	r := execute(context.Background(), "", "serve", "--help")
	envs := map[string]string{}
	seen := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		envs[f.Name] = flagEnv(cmd.Flags(), f.Name)
		if f.Name == "help" {
			return
		}
		seen[f.Name] = true
		if !strings.Contains(r.stdout, "--"+f.Name) {
			t.Errorf("--%s is not in serve --help", f.Name)
		}
		env, ok := table[f.Name]
		switch {
		case !ok:
			t.Errorf("--%s is not in the README's configuration table", f.Name)
		case envs[f.Name] == "":
			t.Errorf("--%s has no environment fallback", f.Name)
		case env != envs[f.Name]:
			t.Errorf("README: --%s falls back to %q, the command to %q", f.Name, env, envs[f.Name])
		}
		if e := envs[f.Name]; e != "" && !strings.Contains(f.Usage, "("+e+")") {
			t.Errorf("--%s's help does not name %s", f.Name, e)
		}
	})
	for name := range table {
		if !seen[name] {
			t.Errorf("the README lists --%s, which reins serve does not have", name)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "4778aee0123456789abcdef"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) 4778aee01234 2026-12-01T10:00:00Z modified"},
		{debug.BuildInfo{}, "(devel)"},
	} {
		if got := versionOf(&tc.bi); got != tc.want {
			t.Errorf("versionOf(%v) = %q, want %q", tc.bi.Main.Version, got, tc.want)
		}
	}
	a := execute(context.Background(), "", "--version").must(t)
	b := execute(context.Background(), "", "version").must(t)
	if !strings.HasPrefix(a.stdout, "reins ") || a.stdout != b.stdout {
		t.Errorf("--version %q, version %q", a.stdout, b.stdout)
	}
}

// TestServeDebugLogs: REINS_LOG_LEVEL=debug logs each request (method,
// path, status, duration) and the steps of a turn.
func TestServeDebugLogs(t *testing.T) {
	bin := reinsDir(t)
	env := reinsEnv(t, bin, "HOME="+t.TempDir(), "REINS_LOG_LEVEL=debug")
	dataDir := filepath.Join(t.TempDir(), "data")
	s := startServe(t, env, freePort(t), dataDir)
	defer s.stop()
	agent := s.waitFor(`agent +(agent_\w+)`, 10*time.Second)[1]
	execute(context.Background(), "", "sessions", "run", "--agent", agent, "--url", s.url, "--api-key", s.key, "@text logged").must(t)
	s.waitFor(`level=DEBUG msg=request method=POST path=/v1/sessions/sesn_\w+/events status=200 duration=`, 10*time.Second)
	s.waitFor(`level=DEBUG msg="model response" session=sesn_\w+ stop_reason=end_turn`, 10*time.Second)
	s.waitFor(`level=DEBUG msg="session status" session=sesn_\w+ status=idle stop_reason=end_turn`, 10*time.Second)
}
