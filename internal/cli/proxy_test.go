package cli

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// docsNginxConf returns the nginx configuration of docs/operations.md (the
// block marked "nginx-test").
func docsNginxConf(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- nginx-test -->\\n```nginx\\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/operations.md has no block marked nginx-test")
	}
	return string(m[1])
}

// replaceOnce replaces old, which s must hold once, by new.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("the documented nginx configuration holds %q %d times, want once", old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// startNginx runs nginx in the foreground with the documented
// configuration, its listen address, certificate and upstream replaced by
// the test's, every path of its own in a temporary directory, and waits
// until it listens. It returns nginx's directory.
func startNginx(t *testing.T, nginx, listen, certFile, keyFile, upstream string) string {
	t.Helper()
	dir := t.TempDir()
	site := docsNginxConf(t)
	site = replaceOnce(t, site, "listen 443 ssl;", "listen "+listen+" ssl;")
	site = replaceOnce(t, site, "/etc/ssl/reins/fullchain.pem", certFile)
	site = replaceOnce(t, site, "/etc/ssl/reins/privkey.pem", keyFile)
	site = replaceOnce(t, site, "proxy_pass http://127.0.0.1:4180;", "proxy_pass http://"+upstream+";")
	// One process (no workers switching to another user when run as
	// root), in the foreground, with its files here.
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, site)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", file, "-e", filepath.Join(dir, "error.log"))
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", out.String(), log)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if c, err := net.Dial("tcp", listen); err == nil {
			c.Close()
			return dir
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s\n%s", out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx does not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNginxReverseProxy: behind nginx configured as docs/operations.md
// says (terminating TLS with a certificate of the test's CA), the
// official Go SDK creates and runs a session whose event stream delivers
// its events as they happen (the first a second before the turn's end,
// not buffered to it), and `reins executor` connects through it over
// wss to run the session's tool.
func TestNginxReverseProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx and reins processes")
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if nginx, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx is not installed (.ci/run installs nginx-light)")
		}
	}
	bin := reinsDir(t)
	upstream := freePort(t)
	s := startServe(t, reinsEnv(t, bin, "HOME="+t.TempDir()), upstream, filepath.Join(t.TempDir(), "data"))

	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, 2, certFile, keyFile)
	listen := freePort(t)
	ndir := startNginx(t, nginx, listen, certFile, keyFile, upstream)
	proxyURL := "https://" + listen

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: ca.pool()}
	client := anthropic.NewClient(option.WithBaseURL(proxyURL), option.WithAPIKey(s.key), option.WithHTTPClient(&http.Client{Transport: tr}), option.WithMaxRetries(0))
	out := &syncBuffer{}
	run := runExecutorSession(t, &client, "nginx", func(envKey string) {
		startExecutorProc(t, reinsEnv(t, bin), out, "--url", proxyURL, "--ca-cert", ca.file, "--environment-key", envKey)
	})
	if !strings.Contains(run.toolResults, "hi from nginx") {
		t.Errorf("tool results %q lack the executor's output", run.toolResults)
	}
	// The turn sleeps a second after its tool call: an unbuffered stream
	// delivers its first event (the user.message) well before the end.
	if run.idle-run.firstEvent < 800*time.Millisecond {
		t.Errorf("first event after %s, the turn's end after %s: the stream was buffered", run.firstEvent, run.idle)
	}
	// The executor was told to dial the proxy over wss, and did.
	if !strings.Contains(out.String(), "connected: serving") {
		t.Errorf("executor output:\n%s", out.String())
	}
	// nginx logs the WebSocket when it ends: when reins stops.
	s.stop()
	var access []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if access, _ = os.ReadFile(filepath.Join(ndir, "access.log")); strings.Contains(string(access), `"GET /v1/executor/connect HTTP/1.1" 101 `) {
			return
		}
	}
	t.Errorf("nginx did not upgrade the executor's connection:\n%s", access)
}
