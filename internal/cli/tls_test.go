package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// testCA is a certificate authority made by a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// file is its certificate, PEM.
	file string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "reins test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue writes a server certificate for 127.0.0.1 and localhost with the
// serial number, signed by the CA, and its key, to certFile and keyFile
// (each replaced at once, by a rename).
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "reins"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	writePEM(t, certFile, "CERTIFICATE", der)
}

// pool is a pool of the CA alone.
func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// writePEM replaces file with one PEM block, by a rename.
func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// protoRecorder records the protocols of the responses it carries.
type protoRecorder struct {
	rt     http.RoundTripper
	mu     sync.Mutex // guards protos
	protos map[string]int
}

func (p *protoRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.rt.RoundTrip(req)
	if err == nil {
		p.mu.Lock()
		p.protos[resp.Proto]++
		p.mu.Unlock()
	}
	return resp, err
}

// TestServeTLS: with --tls-cert and --tls-key, `reins serve` serves
// HTTPS (HTTP/2 to the official Go SDK, whose client trusts the test's
// CA only), its banner names https:// URLs, and `reins executor
// --ca-cert` connects over wss to run the tools of a self-hosted
// environment's session that the SDK created and runs.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs reins processes")
	}
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, 2, certFile, keyFile)
	bin := reinsDir(t)
	addr := freePort(t)
	s := startServe(t, reinsEnv(t, bin, "HOME="+t.TempDir()), addr, filepath.Join(t.TempDir(), "data"), "--tls-cert", certFile, "--tls-key", keyFile)
	defer s.stop()
	s.url = "https://" + addr
	for _, want := range []string{"reins is serving the Managed Agents API at https://" + addr, "--url https://" + addr, "curl -s https://" + addr, `option.WithBaseURL("https://` + addr} {
		if !strings.Contains(s.output(), want) {
			t.Errorf("banner lacks %q:\n%s", want, s.output())
		}
	}
	// Plain HTTP on the port is not served.
	if resp, err := http.Get("http://" + addr + "/v1/agents"); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain http answered %s", resp.Status)
		}
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: ca.pool()}
	rec := &protoRecorder{rt: tr, protos: map[string]int{}}
	client := anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(s.key), option.WithHTTPClient(&http.Client{Transport: rec}), option.WithMaxRetries(0))
	out := &syncBuffer{}
	got := runExecutorSession(t, &client, "tls", func(envKey string) {
		startExecutorProc(t, reinsEnv(t, bin), out, "--url", s.url, "--ca-cert", ca.file, "--environment-key", envKey)
	})
	if !strings.Contains(got.toolResults, "hi from tls") {
		t.Errorf("tool results %q lack the executor's output; executor output:\n%s", got.toolResults, out.String())
	}
	if !strings.Contains(out.String(), "connected: serving") {
		t.Errorf("executor output:\n%s", out.String())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.protos["HTTP/2.0"] == 0 {
		t.Errorf("the SDK's requests went over %v, want HTTP/2 among them", rec.protos)
	}
}

// sessionRun is what runExecutorSession saw.
type sessionRun struct {
	// toolResults are the agent.tool_result events' raw JSON.
	toolResults string
	// firstEvent and idle are how long after the message was sent the
	// stream delivered its first event and the turn's end.
	firstEvent, idle time.Duration
}

// runExecutorSession creates, through client, a self-hosted environment,
// an environment key for it (given to startExecutor, which starts an
// executor with it), an agent with the agent toolset on the scripted
// model and a session; it then streams the session, sends a message whose
// turn runs `echo hi from <name>` on bash and sleeps a second, and reads
// the stream to the turn's end.
func runExecutorSession(t *testing.T, client *anthropic.Client, name string, startExecutor func(envKey string)) sessionRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env, err := client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: name,
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ Key string }
	if err := client.Post(ctx, "/v1/environments/"+env.ID+"/keys", map[string]any{}, &key); err != nil || key.Key == "" {
		t.Fatalf("environment key: %v %+v", err, key)
	}
	agent, err := client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: name, Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	startExecutor(key.Key)
	st := client.Beta.Sessions.Events.StreamEvents(ctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	defer st.Close()
	msg := `@tool bash {"command":"echo hi from ` + name + `"}` + "\n@sleep 1s\n@then done"
	sent := time.Now()
	if _, err := client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: msg}}}}}}}); err != nil {
		t.Fatal(err)
	}
	var run sessionRun
	for st.Next() {
		ev := st.Current()
		if run.firstEvent == 0 {
			run.firstEvent = time.Since(sent)
		}
		switch ev.Type {
		case "agent.tool_result":
			run.toolResults += ev.RawJSON()
		case "session.error":
			t.Fatalf("session.error: %s", ev.RawJSON())
		case "session.status_idle":
			run.idle = time.Since(sent)
			return run
		}
	}
	t.Fatalf("the stream ended before the turn did: %v", st.Err())
	return run
}

// startExecutorProc runs `reins executor` with args (and a workspace and
// name of its own) until the test ends, its output in out.
func startExecutorProc(t *testing.T, env []string, out *syncBuffer, args ...string) {
	t.Helper()
	cmd := exec.Command(lookPath(t, env, "reins"), append([]string{"executor", "--workspace", t.TempDir(), "--name", "tls-test", "--no-sandbox"}, args...)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("reins executor output:\n%s", out.String())
		}
	})
}

// servedSerial is the serial number of the certificate addr serves.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// waitSerial waits until addr serves the certificate with the serial.
func waitSerial(t *testing.T, addr string, roots *x509.CertPool, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := servedSerial(t, addr, roots)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serving certificate %d after %s, want %d", got, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeTLSReload: the certificate is loaded again on SIGHUP and when
// its files change, without a restart; a pair that does not load keeps
// the one served and is logged.
func TestServeTLSReload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs reins processes")
	}
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, 10, certFile, keyFile)
	addr := freePort(t)
	s := startServe(t, reinsEnv(t, reinsDir(t), "HOME="+t.TempDir(), "REINS_TLS_CERT="+certFile, "REINS_TLS_KEY="+keyFile), addr, filepath.Join(t.TempDir(), "data"))
	defer s.stop()
	roots := ca.pool()
	if got := servedSerial(t, addr, roots); got != 10 {
		t.Fatalf("serving certificate %d, want 10", got)
	}

	// SIGHUP, with files whose size and time the poll might not notice
	// yet: the signal alone reloads them at once.
	ca.issue(t, 11, certFile, keyFile)
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitSerial(t, addr, roots, 11, time.Second)
	s.waitFor(`TLS certificate reloaded.*SIGHUP`, 5*time.Second)

	// The files change: the poll reloads them.
	ca.issue(t, 12, certFile, keyFile)
	waitSerial(t, addr, roots, 12, 3*certPollInterval)

	// A key that does not match: the last good pair stays, and the
	// error is logged.
	other := t.TempDir()
	ca.issue(t, 13, filepath.Join(other, "c.pem"), filepath.Join(other, "k.pem"))
	b, _ := os.ReadFile(filepath.Join(other, "k.pem"))
	if err := os.WriteFile(keyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitFor(`TLS certificate not reloaded; still serving the previous one`, 5*time.Second)
	if got := servedSerial(t, addr, roots); got != 12 {
		t.Fatalf("after a bad pair, serving certificate %d, want 12", got)
	}
}

// TestServeTLSFlags: --tls-cert and --tls-key come together or not at
// all, read REINS_TLS_CERT and REINS_TLS_KEY, and a pair that does not
// load stops the start, before the data dir is touched.
func TestServeTLSFlags(t *testing.T) {
	for _, args := range [][]string{{"--tls-cert", "c.pem"}, {"--tls-key", "k.pem"}} {
		dir := t.TempDir()
		r := execute(context.Background(), "", append([]string{"serve", "--data-dir", dir, "--addr", freePort(t), "--sandbox", "none"}, args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), "give both --tls-cert and --tls-key, or neither") {
			t.Errorf("serve %v: %v", args, r.err)
		}
	}
	t.Setenv("REINS_TLS_CERT", "/etc/reins/cert.pem")
	t.Setenv("REINS_TLS_KEY", "/etc/reins/key.pem")
	o := &serveOptions{}
	if err := applyEnv(serveCommand(o).Flags()); err != nil {
		t.Fatal(err)
	}
	if o.tls.cert != "/etc/reins/cert.pem" || o.tls.key != "/etc/reins/key.pem" {
		t.Errorf("from the environment: %+v", o.tls)
	}

	dir := t.TempDir()
	missing := filepath.Join(t.TempDir(), "none.pem")
	r := execute(context.Background(), "", "serve", "--data-dir", dir, "--addr", freePort(t), "--sandbox", "none", "--tls-cert", missing, "--tls-key", missing)
	if r.err == nil || !strings.Contains(r.err.Error(), "TLS certificate "+missing) {
		t.Errorf("serve with a missing pair: %v", r.err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused start wrote to the data dir")
	}
}

// TestLogFormatJSON: --log-format json (REINS_LOG_FORMAT) makes `reins
// serve` and `reins executor` log one JSON object a line; another value
// is refused.
func TestLogFormatJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs reins processes")
	}
	addr := freePort(t)
	s := startServe(t, reinsEnv(t, reinsDir(t), "HOME="+t.TempDir(), "REINS_LOG_FORMAT=json"), addr, filepath.Join(t.TempDir(), "data"))
	s.waitFor(`"msg":"reins serving"`, 10*time.Second)
	s.stop()
	var serving map[string]any
	for _, line := range strings.Split(s.output(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "{") && strings.Contains(line, `"reins serving"`) {
			if err := json.Unmarshal([]byte(line), &serving); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
	}
	for k, want := range map[string]string{"level": "INFO", "msg": "reins serving", "url": "http://" + addr} {
		if serving[k] != want {
			t.Errorf("%s = %v, want %q (line %v)", k, serving[k], want, serving)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, serving["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}

	// The executor's status lines too.
	cmd := newExecutorCommand()
	out := &syncBuffer{}
	cmd.SetErr(out)
	cmd.SetArgs([]string{"--url", "http://" + freePort(t), "--environment-key", "reins_ek_x", "--workspace", t.TempDir(), "--log-format", "json", "--max-reconnect-attempts", "1"})
	cmd.ExecuteContext(context.Background())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var starting, connecting map[string]any
	if len(lines) < 2 || json.Unmarshal([]byte(lines[0]), &starting) != nil || json.Unmarshal([]byte(lines[1]), &connecting) != nil {
		t.Fatalf("executor output:\n%s", out.String())
	}
	if starting["msg"] != "reins executor starting" || starting["server"] == nil || connecting["msg"] != "connecting (attempt 1)" || connecting["level"] != "INFO" {
		t.Errorf("executor lines %v, %v", starting, connecting)
	}

	r := execute(context.Background(), "", "serve", "--data-dir", t.TempDir(), "--sandbox", "none", "--log-format", "yaml")
	if r.err == nil || !strings.Contains(r.err.Error(), "--log-format (REINS_LOG_FORMAT): want text or json") {
		t.Errorf("serve --log-format yaml: %v", r.err)
	}
}
