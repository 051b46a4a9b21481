package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	ma "github.com/reinsdev/reins/managedagents"
)

// The escape suite: a model's bash, run through the API on a real `reins
// serve` (and `reins executor`), tries what an attacker would. Every
// probe must be refused; TestEscapeSuiteCatchesAnUnsandboxedServer runs
// the probes that are safe to run unconfined against --sandbox=none and
// requires each of them to notice the escape, so the suite cannot pass
// with the sandbox switched off.

// Secrets the server is started with; none may ever show in a tool's
// output.
var escapeSecrets = map[string]string{
	"ANTHROPIC_API_KEY": "sk-ant-escape-env-secret-0001",
	"OPENAI_API_KEY":    "sk-openai-escape-env-secret-0002",
	"REINS_API_KEY":     "sk-reins-escape-api-key-0003",
	"REINS_MASTER_KEY":  base64.StdEncoding.EncodeToString([]byte("escape-master-key-32-bytes-long!")),
}

// escapeFlagSecret is given on the command line.
const escapeFlagSecret = "sk-openai-escape-flag-secret-0004"

// escapeServer is a reins serve child with secrets in its environment and
// command line.
type escapeServer struct {
	*child
	key, dataDir string
	agent        string
	stderr       *bytes.Buffer
	// extra are more secrets no tool may see (an executor's key).
	extra []string
}

func startEscapeServer(t *testing.T, args ...string) *escapeServer {
	t.Helper()
	if testing.Short() {
		t.Skip("builds reins and runs it as a child process")
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	addr := freeAddr(t)
	args = append([]string{"serve", "--addr", addr, "--data-dir", dataDir, "--log-level", "warn",
		"--openai-api-key", escapeFlagSecret, "--sandbox-memory", "256M", "--sandbox-processes", "128",
		// The probes poll the API faster than one key's default rate.
		"--requests-per-minute", "0", "--creates-per-minute", "0"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range escapeSecrets {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &escapeServer{child: &child{cmd: cmd, url: "http://" + addr}, key: escapeSecrets["REINS_API_KEY"], dataDir: dataDir, stderr: &stderr}
	t.Cleanup(s.kill)
	waitHealthy(t, s.url, &stderr)
	var agent ma.Agent
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{"name": "attacker", "model": "scripted",
		"tools": []any{map[string]any{"type": "agent_toolset_20260401"}}}, &agent); err != nil {
		t.Fatal(err)
	}
	s.agent = agent.ID
	return s
}

// lockedWriter lets a child's stderr be read while the child writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func waitHealthy(t *testing.T, url string, stderr *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("reins serve did not become ready: %s", stderr)
}

// env creates a cloud environment with the given networking.
func (s *escapeServer) env(t *testing.T, networking map[string]any) string {
	t.Helper()
	body := map[string]any{"name": fmt.Sprintf("env-%d", time.Now().UnixNano()), "config": map[string]any{"type": "cloud", "networking": networking}}
	var env ma.Environment
	if _, err := call(s.url, s.key, "POST", "/v1/environments", body, &env); err != nil {
		t.Fatal(err)
	}
	return env.ID
}

func (s *escapeServer) session(t *testing.T, envID string) string {
	t.Helper()
	var sess ma.Session
	if _, err := call(s.url, s.key, "POST", "/v1/sessions", map[string]any{"agent": s.agent, "environment_id": envID}, &sess); err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

// tools runs one model turn that calls the given tools in order and
// returns the text of each result.
func (s *escapeServer) tools(t *testing.T, sessionID string, calls ...toolCall) []string {
	t.Helper()
	var script strings.Builder
	for _, c := range calls {
		in, _ := json.Marshal(c.input)
		fmt.Fprintf(&script, "@tool %s %s\n", c.name, in)
	}
	script.WriteString("@then done")
	before := len(s.results(t, sessionID))
	body := map[string]any{"events": []any{map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": script.String()}}}}}
	if _, err := call(s.url, s.key, "POST", "/v1/sessions/"+sessionID+"/events", body, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		// The turn is over when the session is idle again and the results
		// are in the log.
		var sess ma.Session
		if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sessionID, nil, &sess); err != nil {
			t.Fatal(err)
		}
		if res := s.results(t, sessionID); len(res) >= before+len(calls) && sess.Status == ma.StatusIdle {
			return res[before:]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the tool calls of %s did not finish", sessionID)
	return nil
}

type toolCall struct {
	name  string
	input map[string]any
}

func bashCall(command string) toolCall {
	return toolCall{"bash", map[string]any{"command": command}}
}

// bash runs one bash command in the session and returns its output.
func (s *escapeServer) bash(t *testing.T, sessionID, command string) string {
	t.Helper()
	return s.tools(t, sessionID, bashCall(command))[0]
}

// results returns the texts of the session's tool results, in order.
func (s *escapeServer) results(t *testing.T, sessionID string) []string {
	t.Helper()
	var page struct {
		Data []ma.Event `json:"data"`
	}
	if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sessionID+"/events?limit=1000&types[]=agent.tool_result", nil, &page); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range page.Data {
		var b strings.Builder
		for _, c := range ev.Content {
			b.WriteString(c.Text)
		}
		out = append(out, b.String())
	}
	return out
}

// alive reports whether the server still answers.
func (s *escapeServer) alive() bool {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(s.url + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// probe is one escape attempt: it returns a description of the escape, or
// "" when the attempt was refused.
type probe func(t *testing.T, s *escapeServer, envID string) string

// leaks reports which secret values occur in out.
func leaks(out string, extra ...string) string {
	var found []string
	for name, v := range escapeSecrets {
		if strings.Contains(out, v) {
			found = append(found, name)
		}
	}
	if strings.Contains(out, escapeFlagSecret) {
		found = append(found, "--openai-api-key")
	}
	for _, v := range extra {
		if v != "" && strings.Contains(out, v) {
			found = append(found, fmt.Sprintf("%.12q…", v))
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "leaked " + strings.Join(found, ", ")
}

// probeServerSecrets looks for the server's environment, command line and
// data dir from inside.
func probeServerSecrets(t *testing.T, s *escapeServer, envID string) string {
	sess := s.session(t, envID)
	apiKey, _ := os.ReadFile(filepath.Join(s.dataDir, "api-key"))
	out := s.bash(t, sess, `cat /proc/$PPID/environ /proc/1/environ 2>&1; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; tr '\0' '\n' < $p/environ; done 2>&1; env;
ls -la `+s.dataDir+` 2>&1; cat `+s.dataDir+`/api-key `+s.dataDir+`/master-key `+s.dataDir+`/reins.db 2>&1 | head -c 100000`)
	if l := leaks(out, append(s.extra, strings.TrimSpace(string(apiKey)))...); l != "" {
		return l
	}
	if strings.Contains(out, "SQLite format 3") || strings.Contains(out, " serve ") {
		return "the server's data dir or process is visible:\n" + out
	}
	return ""
}

// probeEtcShadow reads the host's password hashes.
func probeEtcShadow(t *testing.T, s *escapeServer, envID string) string {
	out := s.bash(t, s.session(t, envID), `cat /etc/shadow 2>&1; ls /etc`)
	if strings.Contains(out, "root:") || strings.Contains(out, "shadow\n") {
		return "/etc/shadow is readable:\n" + out
	}
	return ""
}

// probeLoopback connects to the API, PostgreSQL and a test listener on
// the host's loopback, with raw TCP and through the egress proxy, and to
// a unix socket and an abstract socket of the host.
func probeLoopback(t *testing.T, s *escapeServer, envID string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	sock := filepath.Join(os.TempDir(), fmt.Sprintf("reins-escape-%d.sock", time.Now().UnixNano()))
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	aln, err := net.Listen("unix", "@"+filepath.Base(sock))
	if err != nil {
		t.Fatal(err)
	}
	defer aln.Close()
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	_, testPort, _ := net.SplitHostPort(ln.Addr().String())
	script := fmt.Sprintf(`for p in %[1]s 5432 %[2]s; do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && echo "RAW-OPEN $p"; done
px="${HTTP_PROXY:-http://127.0.0.1:3128}"
curl -sS -m 5 --noproxy '' -x "$px" -o /dev/null -w "API %%{http_code}\n" http://127.0.0.1:%[1]s/healthz 2>&1
curl -sS -m 5 --noproxy '' -x "$px" http://127.0.0.1:%[2]s/ 2>&1; echo
curl -sS -m 5 -o /dev/null -w "API %%{http_code}\n" http://127.0.0.1:%[1]s/healthz 2>&1
/usr/bin/python3 - <<'EOF'
import socket
for addr in [%[3]q, "\0%[4]s"]:
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(addr); print("UNIX-OPEN", repr(addr))
    except Exception as e:
        print("unix refused:", e)
EOF`, apiPort, testPort, sock, filepath.Base(sock))
	out := s.bash(t, s.session(t, envID), script)
	switch {
	case strings.Contains(out, "RAW-OPEN") || strings.Contains(out, "UNIX-OPEN"):
		return "reached the host:\n" + out
	case strings.Contains(out, "API 200"):
		return "reached the API:\n" + out
	case accepted.Load() > 0:
		return fmt.Sprintf("the host's test listener accepted %d connection(s):\n%s", accepted.Load(), out)
	}
	return ""
}

// probeInternalAddresses asks for link-local (metadata) and private
// addresses, raw and through the proxy.
func probeInternalAddresses(t *testing.T, s *escapeServer, envID string) string {
	out := s.bash(t, s.session(t, envID), `for h in 169.254.169.254 10.0.0.1 192.168.1.1; do (exec 3<>/dev/tcp/$h/80) 2>/dev/null && echo "RAW-OPEN $h"; done
for u in http://169.254.169.254/latest/meta-data/ http://metadata.google.internal/ http://10.0.0.1/ http://[::1]:80/ http://0x7f000001/; do
  curl -sS -m 5 --noproxy '' -x "${HTTP_PROXY:-http://127.0.0.1:3128}" -o /dev/null -w "$u %{http_code}\n" $u 2>&1
done`)
	if strings.Contains(out, "RAW-OPEN") {
		return "raw TCP left the sandbox:\n" + out
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "http") && !strings.HasSuffix(line, " 403") {
			return "the proxy did not refuse an internal address:\n" + out
		}
	}
	return ""
}

// probeTmpAcrossSessions leaves files in /tmp and /dev/shm of one session
// and of the host, and looks for them from another session.
func probeTmpAcrossSessions(t *testing.T, s *escapeServer, envID string) string {
	marker := fmt.Sprintf("reins-escape-%d", time.Now().UnixNano())
	for _, d := range []string{os.TempDir(), "/dev/shm"} {
		os.WriteFile(filepath.Join(d, marker+"-host"), []byte("x"), 0o644)
		defer os.Remove(filepath.Join(d, marker+"-host"))
	}
	a, b := s.session(t, envID), s.session(t, envID)
	s.bash(t, a, fmt.Sprintf("touch /tmp/%[1]s-a /dev/shm/%[1]s-a", marker))
	out := s.bash(t, b, "ls -a /tmp /dev/shm /var/tmp")
	host, _ := filepath.Glob(filepath.Join(os.TempDir(), marker+"-a"))
	switch {
	case strings.Contains(out, marker):
		return "another session's or the host's /tmp or /dev/shm is visible:\n" + out
	case len(host) > 0:
		return "a session's /tmp is the host's /tmp"
	}
	return ""
}

// probeOutputsSymlink puts a symbolic link in place of the workspace's
// outputs directory, whose files the server keeps after every tool call:
// to the server's /proc/self, to its data dir, to the host's root and to
// the tools' parent process as the session sees it ($PPID). Nothing behind
// the link may become a File of the session, nor be read through it.
func probeOutputsSymlink(t *testing.T, s *escapeServer, envID string) string {
	apiKey, _ := os.ReadFile(filepath.Join(s.dataDir, "api-key"))
	secrets := append([]string{strings.TrimSpace(string(apiKey))}, s.extra...)
	for _, target := range []string{"/proc/self", s.dataDir, "/", "/proc/$PPID"} {
		sess := s.session(t, envID)
		res := s.tools(t, sess,
			bashCall("rm -rf outputs && ln -s "+target+" outputs && echo linked; cat outputs/environ outputs/api-key 2>&1 | head -c 20000"),
			bashCall("echo a second call, a second collection"))
		if !strings.Contains(res[0], "linked") {
			t.Fatalf("the link to %s was not made: %s", target, res[0])
		}
		kept := s.sessionFiles(t, sess)
		var names []string
		for name := range kept {
			names = append(names, name)
		}
		all := res[0] + strings.Join(slices.Collect(maps.Values(kept)), "\n")
		switch {
		case leaks(all, secrets...) != "":
			return fmt.Sprintf("outputs -> %s: %s", target, leaks(all, secrets...))
		case strings.Contains(all, "SQLite format 3"):
			return fmt.Sprintf("outputs -> %s: the server's database was read", target)
		case len(kept) > 0:
			slices.Sort(names)
			return fmt.Sprintf("outputs -> %s: the server kept %d files through the link: %.300q", target, len(kept), names)
		}
	}
	return ""
}

// sessionFiles downloads the Files of the session's scope (their first
// MiB), by name.
func (s *escapeServer) sessionFiles(t *testing.T, sessionID string) map[string]string {
	t.Helper()
	var page struct {
		Data []ma.File `json:"data"`
	}
	if _, err := call(s.url, s.key, "GET", "/v1/files?limit=1000&scope_id="+sessionID, nil, &page); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range page.Data {
		req, _ := http.NewRequest("GET", s.url+"/v1/files/"+f.ID+"/content", nil)
		req.Header.Set("x-api-key", s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		files[f.Filename] += string(b)
	}
	return files
}

// probePlacementThroughLinks plants links to the server's data dir where
// a file resource is then placed (a directory of its mount path, or the
// file itself): the placing is done by the session's bash inside the
// sandbox, so nothing lands in the data dir.
func probePlacementThroughLinks(t *testing.T, s *escapeServer, envID string) string {
	ctx := context.Background()
	c := anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(s.key), option.WithMaxRetries(0))
	f, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("placed by a resource\n"), "placed.txt", "text/plain")})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ link, target, mount string }{
		{"docs", s.dataDir, "docs/placed.txt"},
		{"placed.txt", filepath.Join(s.dataDir, "placed.txt"), "placed.txt"},
	} {
		link, target, mount := p.link, p.target, p.mount
		sess := s.session(t, envID)
		if out := s.bash(t, sess, "ln -s "+target+" "+link+" && echo planted"); !strings.Contains(out, "planted") {
			t.Fatalf("the link was not made: %s", out)
		}
		if _, err := c.Beta.Sessions.Resources.Add(ctx, sess, anthropic.BetaSessionResourceAddParams{
			BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{FileID: f.ID, MountPath: anthropic.String(mount)},
		}); err != nil {
			t.Fatal(err)
		}
		out := s.bash(t, sess, "echo the resource is placed before this call")
		if placed, _ := filepath.Glob(filepath.Join(s.dataDir, "placed*")); len(placed) > 0 {
			return fmt.Sprintf("a resource was placed in the server's data dir through %s: %v\n%s", link, placed, out)
		}
	}
	return ""
}

// probeHostPaths looks for the server's data dir (where its keys and
// database are) in what a session can read of its processes and mounts.
// The source of the workspace's own mount (and of the environment's
// packages) in mountinfo is a path of the host's file system that a
// sandbox cannot hide: it is the one exception (see docs/decisions.md).
func probeHostPaths(t *testing.T, s *escapeServer, envID string) string {
	// The path reaches bash on its stdin, never in a command line that
	// the search would find.
	out := s.bash(t, s.session(t, envID), `pat=$(cat <<'REINS_EOF'
`+s.dataDir+`
REINS_EOF
)
for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ /proc/mounts /proc/self/mounts; do
  c=$(tr '\0' ' ' < $f 2>/dev/null); [[ "$c" == *"$pat"* ]] && echo "FOUND in $f"
done
while read -r id parent dev root point rest; do
  [[ "$root $point" == *"$pat"* && "$point" != /workspace && "$point" != /opt/reins/packages ]] && echo "FOUND in mountinfo: $root $point"
done < /proc/self/mountinfo
echo searched`)
	if !strings.Contains(out, "searched") || strings.Contains(out, "FOUND") {
		return "the data dir's path is visible:\n" + out
	}
	return ""
}

func TestSandboxEscapes(t *testing.T) {
	s := startEscapeServer(t)
	limited := s.env(t, map[string]any{"type": "limited", "allowed_hosts": []string{"example.com", "127.0.0.1"}})
	unrestricted := s.env(t, map[string]any{"type": "unrestricted"})
	t.Run("loopback limited", func(t *testing.T) {
		if escaped := probeLoopback(t, s, limited); escaped != "" {
			t.Error(escaped)
		}
	})
	runEscapeProbes(t, s, unrestricted)
}

// runEscapeProbes runs every probe in sessions of envID.
func runEscapeProbes(t *testing.T, s *escapeServer, envID string) {
	runProbes(t, s, envID, map[string]probe{
		"server secrets":     probeServerSecrets,
		"etc shadow":         probeEtcShadow,
		"internal addresses": probeInternalAddresses,
		"tmp across":         probeTmpAcrossSessions,
		"loopback":           probeLoopback,
		"outputs symlink":    probeOutputsSymlink,
		"host paths":         probeHostPaths,
		"placement by links": probePlacementThroughLinks,
	})
	t.Run("other sessions", func(t *testing.T) { probeOtherSessions(t, s, envID) })
	t.Run("kill the server", func(t *testing.T) { probeKillServer(t, s, envID) })
	t.Run("devices and fifos", func(t *testing.T) { probeSpecialFiles(t, s, envID) })
	t.Run("privileged calls", func(t *testing.T) { probePrivileged(t, s, envID) })
	t.Run("processes after delete", func(t *testing.T) { probeSurvivesDelete(t, s, envID) })
	t.Run("fork bomb and memory hog", func(t *testing.T) { probeExhaustion(t, s, envID) })
}

// runProbes runs each probe as a subtest, in sessions of envID.
func runProbes(t *testing.T, s *escapeServer, envID string, probes map[string]probe) {
	for name, p := range probes {
		t.Run(name, func(t *testing.T) {
			if escaped := p(t, s, envID); escaped != "" {
				t.Error(escaped)
			}
		})
	}
}

// probeOtherSessions reads and kills another session's processes.
func probeOtherSessions(t *testing.T, s *escapeServer, envID string) {
	a, b := s.session(t, envID), s.session(t, envID)
	secret := fmt.Sprintf("other-session-secret-%d", time.Now().UnixNano())
	s.bash(t, a, "export A_SECRET="+secret+"; (sleep 600 &) ; echo started")
	out := s.bash(t, b, `grep -a -l A_SECRET /proc/*/environ 2>/dev/null; cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep A_SECRET; ps -eo pid,args; kill -9 -1; pkill -9 sleep; echo done`)
	if strings.Contains(out, secret) || strings.Contains(out, "sleep 600") {
		t.Errorf("another session's process or variable is visible:\n%s", out)
	}
	if out := s.bash(t, a, "ps -eo args | grep -c '^sleep 600'"); strings.TrimSpace(out) != "1" {
		t.Errorf("another session killed this session's process: %q", out)
	}
}

// probeKillServer kills whatever it can name.
func probeKillServer(t *testing.T, s *escapeServer, envID string) {
	sess := s.session(t, envID)
	out := s.bash(t, sess, `kill -9 $PPID 1 2>&1; kill -9 -1 2>&1; pkill -9 reins 2>&1; pkill -9 -f serve 2>&1; echo tried`)
	time.Sleep(200 * time.Millisecond)
	if !s.alive() {
		t.Fatalf("the server died:\n%s", out)
	}
	if got := s.bash(t, s.session(t, envID), "echo still-working"); !strings.Contains(got, "still-working") {
		t.Errorf("a new session's tools do not work after the kill attempts: %q", got)
	}
}

// probeSpecialFiles makes a device node and a FIFO, then has the
// server-side file tools read them.
func probeSpecialFiles(t *testing.T, s *escapeServer, envID string) {
	sess := s.session(t, envID)
	t0 := time.Now()
	res := s.tools(t, sess, bashCall("mknod zdev c 1 5; echo mknod=$?; mkfifo ff; echo mkfifo=$?"),
		toolCall{"read", map[string]any{"file_path": "ff"}},
		toolCall{"read", map[string]any{"file_path": "/workspace/zdev"}},
		toolCall{"grep", map[string]any{"pattern": "x"}})
	if time.Since(t0) > 30*time.Second {
		t.Errorf("reading a FIFO blocked for %s", time.Since(t0))
	}
	if strings.Contains(res[0], "mknod=0") {
		t.Errorf("a device node was created: %s", res[0])
	}
	if !strings.Contains(res[1], "FIFO") {
		t.Errorf("read of a FIFO: %q", res[1])
	}
	if !s.alive() {
		t.Fatal("the server died")
	}
}

// probePrivileged tries ptrace, mount and new namespaces from inside.
func probePrivileged(t *testing.T, s *escapeServer, envID string) {
	out := s.bash(t, s.session(t, envID), `unshare -U -r true 2>&1; echo unshare=$?
mount -t tmpfs none /tmp 2>&1; echo mount=$?
/usr/bin/python3 -c 'import ctypes,os; libc=ctypes.CDLL(None, use_errno=True); print("ptrace=%d" % libc.ptrace(16, 1, 0, 0), os.strerror(ctypes.get_errno()))'
id -u; grep -E 'Cap(Eff|Prm)|NoNewPrivs|Seccomp:' /proc/self/status`)
	for _, bad := range []string{"unshare=0", "mount=0", "ptrace=0"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s succeeded:\n%s", bad, out)
		}
	}
	for _, want := range []string{"1000\n", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// probeSurvivesDelete leaves a setsid process behind and deletes the
// session: nothing of it may keep running, and its workspace goes.
func probeSurvivesDelete(t *testing.T, s *escapeServer, envID string) {
	sess := s.session(t, envID)
	tag := fmt.Sprintf("%d", 100000+time.Now().UnixNano()%800000)
	s.bash(t, sess, "setsid sleep "+tag+" </dev/null >/dev/null 2>&1 & echo detached")
	waitHostProcess(t, "sleep "+tag)
	if _, err := call(s.url, s.key, "DELETE", "/v1/sessions/"+sess, nil, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for countHostProcesses("sleep "+tag) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("a setsid process survived the deletion of its session")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ws, _ := filepath.Glob(filepath.Join(s.dataDir, "workspaces", "*", sess))
	if len(ws) > 0 {
		t.Errorf("the deleted session's workspace is still on disk: %v", ws)
	}
}

// waitHostProcess waits until exactly one host process runs args.
func waitHostProcess(t *testing.T, args string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); countHostProcesses(args) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d host processes run %q, want 1", countHostProcesses(args), args)
		}
	}
}

// countHostProcesses counts the host's processes whose command line is
// args.
func countHostProcesses(args string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, _ := os.ReadFile(f)
		if strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == args {
			n++
		}
	}
	return n
}

// probeExhaustion runs a fork bomb and a memory hog in one session: the
// server keeps answering and another session's turn completes.
func probeExhaustion(t *testing.T, s *escapeServer, envID string) {
	bomb := s.session(t, envID)
	done := make(chan string, 1)
	go func() {
		done <- strings.Join(s.tools(t, bomb,
			bashCall(`(bomb() { bomb | bomb & }; bomb) 2>/dev/null & sleep 4; for i in 1 2 3 4 5 6 7 8; do kill -9 -1 2>/dev/null; sleep 0.2; done; echo bomb-survived`),
			bashCall(`/usr/bin/python3 -c 'a=[]
while True: a.append(bytearray(50<<20))' 2>&1 | tail -1; echo hog=${PIPESTATUS[0]}`)), "\n")
	}()
	time.Sleep(time.Second)
	t0 := time.Now()
	for i := 0; i < 5; i++ {
		if !s.alive() {
			t.Fatal("the server stopped answering during the fork bomb")
		}
	}
	other := s.bash(t, s.session(t, envID), "echo other-session-ok")
	if !strings.Contains(other, "other-session-ok") {
		t.Errorf("another session's turn failed: %q", other)
	}
	t.Logf("5 health checks and another session's bash call during the fork bomb took %s", time.Since(t0))
	var out string
	select {
	case out = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the fork bomb session did not finish")
	}
	if !strings.Contains(out, "MemoryError") && !strings.Contains(out, "hog=137") {
		t.Errorf("the memory hog was not stopped:\n%s", out)
	}
	if _, err := call(s.url, s.key, "DELETE", "/v1/sessions/"+bomb, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !s.alive() {
		t.Fatal("the server died")
	}
}

// TestEscapeSuiteCatchesAnUnsandboxedServer runs the probes that are safe
// to run unconfined against a server started with --sandbox=none: each
// must notice its escape, or the suite would pass without a sandbox.
func TestEscapeSuiteCatchesAnUnsandboxedServer(t *testing.T) {
	s := startEscapeServer(t, "--sandbox", "none")
	envID := s.env(t, map[string]any{"type": "unrestricted"})
	for name, p := range map[string]probe{
		"server secrets":  probeServerSecrets,
		"etc shadow":      probeEtcShadow,
		"loopback":        probeLoopback,
		"tmp across":      probeTmpAcrossSessions,
		"outputs symlink": probeOutputsSymlink,
		"host paths":      probeHostPaths,
	} {
		t.Run(name, func(t *testing.T) {
			escaped := p(t, s, envID)
			if escaped == "" {
				t.Errorf("the probe saw no escape from an unsandboxed server")
			}
			t.Logf("%.300s", escaped)
		})
	}
}

// TestSandboxEgressProxy: an allowed host (a loopback test server the
// operator allowlisted) is reachable through the proxy, a denied host
// gets a refusal the model can read, and raw TCP around the proxy fails.
func TestSandboxEgressProxy(t *testing.T) {
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello from the allowed test server")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	s := startEscapeServer(t, "--egress-allow", "127.0.0.1/32")
	envID := s.env(t, map[string]any{"type": "limited", "allowed_hosts": []string{"127.0.0.1"}})
	port := ln.Addr().(*net.TCPAddr).Port
	out := s.bash(t, s.session(t, envID), fmt.Sprintf(`curl -sS -m 10 --noproxy '' -x "$HTTP_PROXY" http://127.0.0.1:%[1]d/; echo
curl -sS -m 10 --noproxy '' -x "$HTTP_PROXY" http://denied.example/; echo
curl -sS -m 10 --noproxy '' -x "$HTTP_PROXY" https://denied.example/ 2>&1; echo
(exec 3<>/dev/tcp/127.0.0.1/%[1]d) 2>/dev/null && echo RAW-OPEN || echo raw-refused`, port))
	t.Logf("%s", out)
	if !strings.Contains(out, "hello from the allowed test server") {
		t.Errorf("the allowed host was not reached through the proxy:\n%s", out)
	}
	if !strings.Contains(out, "denied.example is not allowed") && !strings.Contains(out, "not allowed by this environment") {
		t.Errorf("the denied host's refusal is not readable:\n%s", out)
	}
	if !strings.Contains(out, "403") {
		t.Errorf("CONNECT to a denied host was not refused with 403:\n%s", out)
	}
	if !strings.Contains(out, "raw-refused") || hits.Load() != 1 {
		t.Errorf("raw TCP went around the proxy (%d hits):\n%s", hits.Load(), out)
	}
}

// TestExecutorSandboxEscapes runs the whole escape suite against the
// sandboxes of `reins executor`: its environment key and variables stay
// invisible to the tools it runs, and they cannot kill it.
func TestExecutorSandboxEscapes(t *testing.T) {
	s := startEscapeServer(t)
	envID, key := s.selfHosted(t, "hands")
	bin, _ := buildReins()
	cmd := exec.Command(bin, "executor", "--url", s.url, "--workspace", t.TempDir(), "--name", "escape-hands",
		"--max-sessions", "16", "--sandbox-memory", "256M", "--sandbox-processes", "128")
	s.startExecutor(t, cmd, key, "executor-own-secret-0005")
	runEscapeProbes(t, s, envID)
	if cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("the tools killed reins executor")
	}
}

// selfHosted creates a self-hosted environment and a key of it.
func (s *escapeServer) selfHosted(t *testing.T, name string) (envID, key string) {
	t.Helper()
	var env ma.Environment
	if _, err := call(s.url, s.key, "POST", "/v1/environments", map[string]any{"name": name, "config": map[string]any{"type": "self_hosted"}}, &env); err != nil {
		t.Fatal(err)
	}
	var k struct{ Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env.ID+"/keys", nil, &k); err != nil {
		t.Fatal(err)
	}
	return env.ID, k.Key
}

// startExecutor starts cmd, an executor of the server, with the
// environment key (REINS_ENVIRONMENT_KEY) and a secret of its own
// (EXECUTOR_SECRET) in its environment; both join the secrets no tool may
// see. It is killed when the test ends, its output logged if it failed.
func (s *escapeServer) startExecutor(t *testing.T, cmd *exec.Cmd, key, secret string) {
	t.Helper()
	s.extra = []string{key, secret}
	cmd.Env = append(os.Environ(), "REINS_URL="+s.url, "REINS_ENVIRONMENT_KEY="+key, "EXECUTOR_SECRET="+secret)
	var buf bytes.Buffer
	out := &lockedWriter{w: &buf}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", cmd.Path, buf.String())
		}
	})
}

// TestEnvironmentDeletedRetiresItsSandboxes: deleting a cloud environment
// stops its in-process executor and tears its sessions' sandboxes down.
func TestEnvironmentDeletedRetiresItsSandboxes(t *testing.T) {
	s := start(t, options{})
	var env ma.Environment
	if _, err := call(s.url, s.key, "POST", "/v1/environments", map[string]any{"name": "doomed"}, &env); err != nil {
		t.Fatal(err)
	}
	var agent ma.Agent
	if _, err := call(s.url, s.key, "POST", "/v1/agents", map[string]any{"name": "a", "model": "scripted",
		"tools": []any{map[string]any{"type": "agent_toolset_20260401"}}}, &agent); err != nil {
		t.Fatal(err)
	}
	es := &escapeServer{child: &child{url: s.url}, key: s.key, agent: agent.ID}
	tag := fmt.Sprintf("%d", 100000+time.Now().UnixNano()%800000)
	es.bash(t, es.session(t, env.ID), "setsid sleep "+tag+" </dev/null >/dev/null 2>&1 & echo detached")
	waitHostProcess(t, "sleep "+tag)
	if _, err := call(s.url, s.key, "DELETE", "/v1/environments/"+env.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for countHostProcesses("sleep "+tag) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("a sandbox of a deleted environment is still running")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
