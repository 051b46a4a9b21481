package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	ma "github.com/reinsdev/reins/managedagents"
)

// smallDiskChild runs reins serve (SQLite) with its data dir on a tmpfs of
// size bytes mounted in a mount namespace of its own (unshare -m, as
// root), and returns it with the data dir as this process sees it
// (through /proc/<pid>/root). Skipped where mount namespaces are not
// allowed.
func smallDiskChild(t *testing.T, size string) (*child, *server, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds reins and runs it as a process")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs in a mount namespace needs root")
	}
	if err := exec.Command("unshare", "-m", "true").Run(); err != nil {
		t.Skipf("no mount namespaces here: %v", err)
	}
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	dir, addr, key := t.TempDir(), freeAddr(t), "sk-reins-disk-full-key"
	cmd := exec.Command("unshare", "-m", "sh", "-c", `mount -t tmpfs -o size="$1" tmpfs "$2" && exec "$3" serve --addr "$4" --data-dir "$2" --sandbox none --requests-per-minute 0 --creates-per-minute 0`,
		"sh", size, dir, bin, addr)
	cmd.Env = append(childEnv(), "REINS_API_KEY="+key)
	out := &syncBuffer{}
	cmd.Stderr = out
	c := runChild(t, cmd, addr, out)
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("reins serve:\n%s", lastLines(out.String(), 40))
		}
	})
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	s := &server{url: c.url, key: key, client: anthropic.NewClient(option.WithBaseURL(c.url), option.WithAPIKey(key), option.WithMaxRetries(0), option.WithHTTPClient(hc))}
	return c, s, filepath.Join(fmt.Sprintf("/proc/%d/root", c.cmd.Process.Pid), dir)
}

// fill writes a file into dir until its file system is full, and returns
// its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// probeGet GETs one of the server's probes (no key): its status, its
// retry-after and its body.
func probeGet(t *testing.T, s *server, path string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("retry-after"), string(b)
}

// TestDiskFullIsADelay fills the file system of a SQLite server while
// eight turns are in a model call. While it is full, sends are answered
// 503 overloaded_error with retry-after (which the SDKs retry), /readyz
// says writes fail and /healthz still answers. Once space is freed, every
// turn ends without a restart, and every message, the refused ones sent
// again, is answered once.
func TestDiskFullIsADelay(t *testing.T) {
	_, s, dir := smallDiskChild(t, "64m")
	agent := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	const n = 8
	sids := make([]string, n)
	for i := range sids {
		sids[i] = s.newSession(t, agent.ID, env.ID).ID
		s.send(t, sids[i], userMessage("@sleep 2s\n@text answer 0"))
	}
	for _, sid := range sids {
		pollUntil(t, 20*time.Second, "a model call of "+sid, func() bool {
			evs := s.listAll(t, sid)
			return evs[len(evs)-1].Type == ma.EventSpanModelRequestStart
		})
	}
	filler := fill(t, dir)
	full := time.Now()
	for _, sid := range sids {
		_, err := s.client.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("@text answer 1")}})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || ae.Response.Header.Get("retry-after") == "" ||
			!strings.Contains(ae.RawJSON(), `"overloaded_error"`) {
			t.Errorf("a send on a full disk: %v; want 503 overloaded_error with retry-after", err)
		}
	}
	if status, retry, body := probeGet(t, s, "/readyz"); status != http.StatusServiceUnavailable || retry == "" || !strings.Contains(body, "full") {
		t.Errorf("/readyz on a full disk: %d retry-after %q %s", status, retry, body)
	}
	if status, _, body := probeGet(t, s, "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz on a full disk: %d %s", status, body)
	}
	// The model calls end meanwhile; their answers cannot be recorded.
	time.Sleep(time.Until(full.Add(3 * time.Second)))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	if status, _, body := probeGet(t, s, "/readyz"); status != http.StatusOK {
		t.Errorf("/readyz once space is back: %d %s", status, body)
	}
	for _, sid := range sids {
		pollUntil(t, 15*time.Second, "the first turn's end of "+sid, func() bool { return len(answers(t, s, sid)) == 1 })
	}
	t.Logf("every turn ended %v after space was freed", time.Since(freed).Round(time.Millisecond))
	for _, sid := range sids {
		s.send(t, sid, userMessage("@text answer 1")) // the refused send, again
	}
	for _, sid := range sids {
		pollUntil(t, 15*time.Second, "the second turn's end of "+sid, func() bool { return len(answers(t, s, sid)) == 2 })
		evs := s.listAll(t, sid)
		if got := answers(t, s, sid); got[0] != "answer 0" || got[1] != "answer 1" {
			t.Errorf("session %s: answers %q", sid, got)
		}
		for _, ev := range evs {
			if ev.Type == ma.EventSessionError {
				t.Errorf("session %s: session.error %+v", sid, ev.Error)
			}
		}
		if u := countUserMessages(evs); u != 2 {
			t.Errorf("session %s: %d user messages, want 2 (the refused send stored nothing)", sid, u)
		}
	}
}

// answers returns the texts of a session's agent.message events, once
// the session is idle (nil before).
func answers(t *testing.T, s *server, sid string) []string {
	t.Helper()
	evs := s.listAll(t, sid)
	if evs[len(evs)-1].Type != ma.EventStatusIdle {
		return nil
	}
	var out []string
	for _, ev := range evs {
		if ev.Type == ma.EventAgentMessage {
			out = append(out, ev.Content[0].Text)
		}
	}
	return out
}

func countUserMessages(evs []ma.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == ma.EventUserMessage {
			n++
		}
	}
	return n
}
