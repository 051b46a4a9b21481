package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/httpapi"
)

// TestServeOutboundAllow: --outbound-allow reads REINS_OUTBOUND_ALLOW by
// default and refuses an entry that is not an address or prefix before
// anything starts.
func TestServeOutboundAllow(t *testing.T) {
	serveSliceFromEnv(t, "outbound-allow", "REINS_OUTBOUND_ALLOW", "127.0.0.1/32", "::1")
	r := execute(context.Background(), "", "serve", "--data-dir", t.TempDir(), "--sandbox", "none", "--outbound-allow", "localhost")
	if r.err == nil || !strings.Contains(r.err.Error(), "--outbound-allow") || !strings.Contains(r.err.Error(), `"localhost"`) {
		t.Fatalf("serve --outbound-allow localhost: %v", r.err)
	}
}

// serveSliceFromEnv checks that serve's list flag reads want, joined by
// commas, from the environment variable env by default.
func serveSliceFromEnv(t *testing.T, flag, env string, want ...string) {
	t.Helper()
	t.Setenv(env, strings.Join(want, ","))
	fs := newServeCommand().Flags()
	if err := applyEnv(fs); err != nil {
		t.Fatal(err)
	}
	got, err := fs.GetStringSlice(flag)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("--%s default = %q, %v", flag, got, err)
	}
}

// TestServeCleartextCredentials: --egress-cleartext-credentials reads
// REINS_EGRESS_CLEARTEXT_CREDENTIALS by default and refuses an entry that
// is not a host, an IP address or *.domain before anything starts.
func TestServeCleartextCredentials(t *testing.T) {
	serveSliceFromEnv(t, "egress-cleartext-credentials", "REINS_EGRESS_CLEARTEXT_CREDENTIALS", "git.internal", "*.corp.example", "10.0.0.7")
	for _, bad := range []string{"http://git.internal", "git.internal:80", "*", "a..b"} {
		r := execute(context.Background(), "", "serve", "--data-dir", t.TempDir(), "--sandbox", "none", "--egress-cleartext-credentials", bad)
		if r.err == nil || !strings.Contains(r.err.Error(), "--egress-cleartext-credentials") || !strings.Contains(r.err.Error(), bad) {
			t.Errorf("serve --egress-cleartext-credentials %s: %v", bad, r.err)
		}
	}
}

// TestServeMirrorFlags: --pip-index-url and --npm-registry read their
// environment variables by default and refuse, before anything starts,
// a value that is not an absolute http or https URL, naming the flag.
func TestServeMirrorFlags(t *testing.T) {
	t.Setenv("REINS_PIP_INDEX_URL", "http://pypi.internal/simple/")
	t.Setenv("REINS_NPM_REGISTRY", "https://npm.internal/")
	f := newServeCommand().Flags()
	if err := applyEnv(f); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.GetString("pip-index-url"); got != "http://pypi.internal/simple/" {
		t.Errorf("--pip-index-url default = %q", got)
	}
	if got, _ := f.GetString("npm-registry"); got != "https://npm.internal/" {
		t.Errorf("--npm-registry default = %q", got)
	}
	for _, tc := range []struct{ flag, value string }{
		{"--pip-index-url", "pypi.internal/simple"},
		{"--pip-index-url", "ftp://pypi.internal/simple/"},
		{"--npm-registry", "/npm/"},
		{"--npm-registry", "http://"},
		{"--npm-registry", "http://npm.internal:port/"},
	} {
		r := execute(context.Background(), "", "serve", "--data-dir", t.TempDir(), "--sandbox", "none", tc.flag, tc.value)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.flag) || !strings.Contains(r.err.Error(), tc.value) {
			t.Errorf("serve %s %s: %v", tc.flag, tc.value, r.err)
		}
	}
}

// TestServeLimitFlags: the body timeout defaults to 30 s, the per-key
// limits are off unless set (0) and the bound on streams at once is the
// open-file limit's (0); they read their environment variables, reach
// the API's configuration, and refuse a negative value, or a body
// timeout that is not positive, before anything starts.
func TestServeLimitFlags(t *testing.T) {
	cmd := newServeCommand()
	for flag, want := range map[string]string{"body-timeout": "30s", "creates-per-minute": "0", "requests-per-minute": "0", "streams-per-key": "0",
		"max-requests": "1024", "max-streams": "0"} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default %s, want %s", flag, got, want)
		}
	}

	t.Setenv("REINS_BODY_TIMEOUT", "5s")
	t.Setenv("REINS_CREATES_PER_MINUTE", "0")
	t.Setenv("REINS_REQUESTS_PER_MINUTE", "1200")
	t.Setenv("REINS_STREAMS_PER_KEY", "8")
	t.Setenv("REINS_MAX_STREAMS", "500")
	o := &serveOptions{}
	cmd = serveCommand(o)
	if err := applyEnv(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if _, err := o.check(); err != nil {
		t.Fatal(err)
	}
	got := o.httpConfig()
	want := httpapi.Config{BodyTimeout: 5 * time.Second, Limits: httpapi.KeyLimits{CreatesPerMinute: 0, RequestsPerMinute: 1200, Streams: 8}, MaxFileSize: httpapi.DefaultMaxFileSize}
	if got.BodyTimeout != want.BodyTimeout || got.Limits != want.Limits || got.MaxStreams != 500 {
		t.Errorf("API configuration %+v, want %+v", got, want)
	}

	for _, tc := range []struct{ flag, value string }{
		{"--body-timeout", "0s"},
		{"--creates-per-minute", "-1"},
		{"--requests-per-minute", "-5"},
		{"--streams-per-key", "-1"},
		{"--max-streams", "-3"},
	} {
		r := execute(context.Background(), "", "serve", "--data-dir", t.TempDir(), "--sandbox", "none", tc.flag, tc.value)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.flag) || !strings.Contains(r.err.Error(), tc.value) {
			t.Errorf("serve %s %s: %v", tc.flag, tc.value, r.err)
		}
	}
}

// TestServeDebugAddr: --debug-addr serves the runtime's profiles on a
// listener of its own, not on the API's address; an address that cannot
// be bound stops the start, naming the flag, before the data dir is
// touched.
func TestServeDebugAddr(t *testing.T) {
	debug := freePort(t)
	s := startServe(t, reinsEnv(t, reinsDir(t), "HOME="+t.TempDir()), freePort(t), filepath.Join(t.TempDir(), "data"), "--debug-addr", debug)
	defer s.stop()
	body := httpGet(t, "http://"+debug+"/debug/pprof/goroutine?debug=1", http.StatusOK)
	if first, _, _ := strings.Cut(body, "\n"); !strings.HasPrefix(first, "goroutine profile: total ") {
		t.Errorf("goroutine profile starts with %q", first)
	}
	if resp, err := http.Get(s.url + "/debug/pprof/"); err != nil || resp.StatusCode == http.StatusOK {
		t.Errorf("the API's address serves /debug/pprof/: %v", err)
	} else {
		resp.Body.Close()
	}

	dir := t.TempDir()
	r := execute(context.Background(), "", "serve", "--data-dir", dir, "--addr", freePort(t), "--sandbox", "none", "--debug-addr", "127.0.0.1:http-alt-x")
	if r.err == nil || !strings.Contains(r.err.Error(), "--debug-addr (REINS_DEBUG_ADDR)") {
		t.Fatalf("serve --debug-addr with a bad port: %v", r.err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused start wrote to the data dir")
	}
}

// httpGet does a GET and fails the test unless it answers want.
func httpGet(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", url, resp.StatusCode, want, b)
	}
	return string(b)
}
