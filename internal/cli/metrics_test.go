package cli

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeMetricsAddr: --metrics-addr serves /metrics on a listener of
// its own, not on the API's address; without it the server listens on
// the API's address only. A bad address stops the start, naming the
// flag, before the data dir is touched, and so does a bad
// --otlp-endpoint.
func TestServeMetricsAddr(t *testing.T) {
	metrics := freePort(t)
	env := reinsEnv(t, reinsDir(t), "HOME="+t.TempDir())
	s := startServe(t, env, freePort(t), filepath.Join(t.TempDir(), "data"), "--metrics-addr", metrics)
	body := httpGet(t, "http://"+metrics+"/metrics", http.StatusOK)
	for _, want := range []string{"reins_sse_subscribers 0", "reins_executor_connections", "reins_tool_slots_held", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/metrics", nil)
	req.Header.Set("x-api-key", s.key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the API's address: %v %v, want 404", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	if n := listeners(t, s.cmd.Process.Pid); n != 2 {
		t.Errorf("with --metrics-addr the server listens on %d sockets, want 2", n)
	}
	s.stop()

	plain := startServe(t, env, freePort(t), filepath.Join(t.TempDir(), "data"))
	if n := listeners(t, plain.cmd.Process.Pid); n != 1 {
		t.Errorf("by default the server listens on %d sockets, want 1 (the API's)", n)
	}
	plain.stop()

	for _, tc := range []struct{ flag, value, name string }{
		{"--metrics-addr", "127.0.0.1:http-alt-x", "--metrics-addr (REINS_METRICS_ADDR)"},
		{"--otlp-endpoint", "collector:4318", "--otlp-endpoint (REINS_OTLP_ENDPOINT)"},
	} {
		dir := t.TempDir()
		r := execute(context.Background(), "", "serve", "--data-dir", dir, "--addr", freePort(t), "--sandbox", "none", tc.flag, tc.value)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.name) {
			t.Errorf("serve %s %s: %v", tc.flag, tc.value, r.err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("the refused start (%s) wrote to the data dir", tc.flag)
		}
	}
}

// TestServeTelemetryDefaults: metrics and traces are off by default;
// REINS_METRICS_ADDR and REINS_OTLP_ENDPOINT turn them on, and so does the
// standard OTEL_EXPORTER_OTLP_ENDPOINT for traces (the exporter reads it).
func TestServeTelemetryDefaults(t *testing.T) {
	for _, v := range append([]string{"REINS_METRICS_ADDR", "REINS_OTLP_ENDPOINT"}, otelEndpointVars...) {
		t.Setenv(v, "")
	}
	start := func() *serveTelemetry {
		t.Helper()
		o := &serveOptions{}
		cmd := serveCommand(o)
		if err := applyEnv(cmd.Flags()); err != nil {
			t.Fatal(err)
		}
		tel, err := o.startTelemetry(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tel.close)
		return tel
	}
	if tel := start(); tel.metrics != nil || tel.tracing != nil || tel.srv != nil {
		t.Fatalf("telemetry on by default: %+v", tel)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	if tel := start(); tel.tracing == nil || tel.tracing.Endpoint != "" || tel.metrics != nil {
		t.Fatalf("with OTEL_EXPORTER_OTLP_ENDPOINT: %+v", tel)
	}
	t.Setenv("REINS_OTLP_ENDPOINT", "http://collector:4318")
	addr := freePort(t)
	t.Setenv("REINS_METRICS_ADDR", addr)
	tel := start()
	if tel.tracing == nil || tel.tracing.Endpoint != "http://collector:4318" || tel.metrics == nil {
		t.Fatalf("with REINS_OTLP_ENDPOINT and REINS_METRICS_ADDR: %+v", tel)
	}
	httpGet(t, "http://"+addr+"/metrics", http.StatusOK)
}

// listeners counts the listening TCP sockets of the process pid.
func listeners(t *testing.T, pid int) int {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" && inodes[fields[9]] { // 0A: LISTEN
				n++
			}
		}
		f.Close()
	}
	return n
}
